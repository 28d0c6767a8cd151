//! The episode index's law, once for both engines: how each call moves its
//! episode's summary (`EpisodeRow::created`, `EpisodeRow::ended`) and which
//! position it takes among the episode's calls (`Move::apply`). Both
//! engines keep a batch's moves (`Moves`), by episode and in the order they
//! were made, and apply them at the batch's end: the embedded engine so that
//! a summary is decoded and written once a batch rather than twice a call;
//! the PostgreSQL engine also so that a summary is locked only from the
//! batch's flush to its COMMIT and two nodes' batches creating calls in one
//! episode run side by side until then.

use crate::model::{EpisodeRow, Task, TaskKey};
use std::collections::BTreeMap;

/// How one call moves its episode's summary.
pub(crate) enum Move {
    /// A new task row (started, or imported whole in any state): the
    /// episode's next position.
    Created(TaskKey, Task),
    /// A started call that ended.
    Ended(Task),
}

impl Move {
    /// Moves `row`, the summary of the call's episode, as the call does: a
    /// created call takes the count of calls before it as its position,
    /// returned with its key.
    pub(crate) fn apply(self, row: &mut EpisodeRow) -> Option<(TaskKey, u64)> {
        match self {
            Move::Created(key, task) => {
                let seq = row.created(&task);
                Some((key, seq))
            }
            Move::Ended(task) => {
                row.ended(&task, true);
                None
            }
        }
    }
}

/// A batch's moves, by episode, each episode's in the order they were made.
#[derive(Default)]
pub(crate) struct Moves {
    /// By episode in byte order: the order summaries are locked in.
    by_episode: BTreeMap<String, Vec<Move>>,
    len: usize,
}

/// One episode's summary with its moves applied.
pub(crate) struct Moved {
    pub episode: String,
    /// The summary before (none: the episode is new) and after.
    pub was: Option<EpisodeRow>,
    pub row: EpisodeRow,
    /// Each created call's position, in order.
    pub positions: Vec<(TaskKey, u64)>,
}

/// One episode's moves (see `Moves::into_episodes`).
pub(crate) struct EpisodeMoves {
    pub episode: String,
    moves: Vec<Move>,
}

impl Moves {
    /// A call whose task row was just written.
    pub(crate) fn created(&mut self, key: &TaskKey, task: &Task) {
        self.push(&key.episode, Move::Created(key.clone(), task.clone()));
    }

    /// A call that left `started` as `task`.
    pub(crate) fn ended(&mut self, key: &TaskKey, task: &Task) {
        self.push(&key.episode, Move::Ended(task.clone()));
    }

    fn push(&mut self, episode: &str, m: Move) {
        match self.by_episode.get_mut(episode) {
            Some(moves) => moves.push(m),
            None => {
                self.by_episode.insert(episode.to_string(), vec![m]);
            }
        }
        self.len += 1;
    }

    /// Moves kept, over all episodes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The episodes moved, in byte order.
    pub(crate) fn episodes(&self) -> impl Iterator<Item = &str> {
        self.by_episode.keys().map(String::as_str)
    }

    /// Each episode's moves, in byte order of the episodes.
    pub(crate) fn into_episodes(self) -> impl Iterator<Item = EpisodeMoves> {
        self.by_episode.into_iter().map(|(episode, moves)| EpisodeMoves { episode, moves })
    }
}

impl EpisodeMoves {
    /// The episode's summary `was` (as stored; none for a new episode)
    /// moved by its calls in order.
    pub(crate) fn apply(self, was: Option<EpisodeRow>) -> Moved {
        let mut row = was.clone().unwrap_or_default();
        let positions = self.moves.into_iter().filter_map(|m| m.apply(&mut row)).collect();
        Moved { episode: self.episode, was, row, positions }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Surface, TaskState, summarize_calls};
    use crate::refs::Ref;

    fn key(episode: &str, id: &str) -> TaskKey {
        TaskKey { surface: Surface::Mcp, episode: episode.into(), task_id: id.into() }
    }

    fn task(at: u64, state: TaskState) -> Task {
        Task {
            request_digest: Ref::of(b"d"),
            state,
            started_at: at,
            committed: None,
            effect_records: vec![],
            transition: "tools.echo".into(),
            ended_at: (state != TaskState::Started).then_some(at + 1),
            effects: vec![],
            context: None,
            message_id: None,
            run: None,
        }
    }

    #[test]
    fn a_batchs_moves_number_its_calls_after_the_stored_ones_and_sum_as_its_calls_do() {
        let stored = summarize_calls([&task(10, TaskState::Committed), &task(11, TaskState::Started)]);
        let mut moves = Moves::default();
        moves.created(&key("b", "x"), &task(20, TaskState::Started));
        moves.created(&key("a", "1"), &task(21, TaskState::Started));
        moves.ended(&key("a", "1"), &task(21, TaskState::Committed));
        moves.created(&key("a", "2"), &task(22, TaskState::Started));
        assert_eq!((moves.len(), moves.episodes().collect::<Vec<_>>()), (4, vec!["a", "b"]));
        let moved: Vec<Moved> = moves
            .into_episodes()
            .map(|m| if m.episode == "a" { m.apply(Some(stored.clone())) } else { m.apply(None) })
            .collect();
        let (a, b) = (&moved[0], &moved[1]);
        assert_eq!(a.positions, vec![(key("a", "1"), 2), (key("a", "2"), 3)]);
        assert_eq!(b.positions, vec![(key("b", "x"), 0)]);
        assert_eq!((a.was.as_ref(), b.was.as_ref()), (Some(&stored), None));
        let calls = [
            task(10, TaskState::Committed),
            task(11, TaskState::Started),
            task(21, TaskState::Committed),
            task(22, TaskState::Started),
        ];
        assert_eq!(a.row, summarize_calls(&calls));
        assert_eq!(b.row, summarize_calls([&task(20, TaskState::Started)]));
    }
}

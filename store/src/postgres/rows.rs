//! The PostgreSQL engine's rows inside one batch transaction (READ COMMITTED).
//!
//! Every read a decision rests on either locks its row (`FOR UPDATE`: heads,
//! tasks, spend, receipts) or, when the row is absent, makes the later write
//! a plain insert that a unique key refuses if another node got there first;
//! such a refusal aborts the transaction and the batch is run again from the
//! start, when the checks see the other node's row. (An upsert there would
//! silently overwrite the other node's write: a lost debit, a lost publish.)
//! Two hot rows are locked only at the batch's end (`flush`), the head and
//! then the episode summaries, so that other nodes' batches wait on them for
//! no more than a flush and a COMMIT. Each statement is one round trip
//! (`query_typed`: no prepare).

use super::conn::{Conn, Param};
use crate::error::WriteError;
use crate::model::*;
use crate::ops::episodes::Moves;
use crate::ops::{Append, ApprovalRows, Pending, R, Rows, chain};
use crate::referrers::{entry_targets, object_targets, world_targets};
use crate::refs::Ref;
use crate::rows;
use crate::tables::{REFERRER_ENTRY, REFERRER_OBJECT, REFERRER_WORLD, SELECTED_HEAD};
use postgres::Row;
use postgres::types::Type;
use std::collections::{HashMap, HashSet};

/// The most started tasks or open intents one recovery sweep resolves; the
/// rest wait for the next sweep.
pub(crate) const RECOVERY_ROWS_MAX: i64 = 10_000;

/// Most moves of the episode index a transaction keeps before it writes
/// them: an import, one transaction, would otherwise hold every call it
/// brings in. No batch makes as many.
const MOVES_KEPT_MAX: usize = 1 << 14;

pub(crate) struct PgRows<'c> {
    conn: &'c mut Conn,
    /// This node: recorded on the tasks it starts.
    node: &'c str,
    /// The database error that ended the batch, if one did: the caller tells
    /// a conflict (run the batch again) from a lost connection.
    pub(crate) failure: Option<postgres::Error>,
    /// Rows this transaction read as absent: writing one is an insert that
    /// must not meet another node's row.
    absent: HashSet<(&'static str, String)>,
    /// Task rows this transaction locked or wrote: read again from here
    /// (a create and its commit often share a batch).
    tasks: HashMap<TaskKey, Task>,
    /// Objects this transaction wrote: known to the node once it commits.
    pub(crate) inserted: Vec<Ref>,
    /// Worlds this transaction wrote: known to the node once it commits (the
    /// next call's head world, on a node that appends alone).
    pub(crate) worlds: Vec<World>,
    /// `world/selected` as this transaction locked it (and then moved it),
    /// and the next log index once it appended: the log's length follows
    /// from them.
    selected: Option<Option<Ref>>,
    next_index: Option<u64>,
    /// Invocations whose checks passed, chained and written at the batch's
    /// end (`flush`) so that `world/selected` is locked last; their tasks and
    /// objects.
    pending: Vec<Pending>,
    pending_tasks: HashSet<TaskKey>,
    pending_objects: HashSet<Ref>,
    /// What each placeholder answer stands for, in order (see `placeholder`).
    pub(crate) chained: Vec<Committed>,
    /// Registry entries read at the batch's start (`read_registry_entries`)
    /// or written since, absent ones as `None`.
    registry: HashMap<(String, String), Option<Ref>>,
    /// How the batch's calls move the episode index, applied by `flush`,
    /// which locks the summaries then.
    moves: Moves,
    /// Tasks the batch created, written without their position until the
    /// flush gives it (`episode_columns`): their row is written again only
    /// then, as the batch leaves it (`tasks` holds it meanwhile), so that a
    /// call created and committed in one batch costs an insert and one
    /// update.
    unnumbered: HashSet<TaskKey>,
    /// Objects and worlds known committed (immutable: never removed).
    known: &'c Known,
    /// Whether `open_intents` searches every call of the lapsed nodes, the
    /// finished ones too, rather than only their started tasks (see
    /// `writer::sweep`).
    pub(crate) finished_calls: bool,
}

/// Immutable rows this node has seen committed: objects that exist and
/// worlds by ref, so that checks need not ask again. Bounded.
#[derive(Default)]
pub(crate) struct Known {
    objects: std::sync::Mutex<HashSet<Ref>>,
    worlds: std::sync::Mutex<HashMap<Ref, World>>,
    /// A world was seen selected (it stays so).
    selected: std::sync::atomic::AtomicBool,
}

/// Most objects and worlds `Known` holds; past it, it starts over.
pub const KNOWN_OBJECTS_MAX: usize = 1 << 16;
pub const KNOWN_WORLDS_MAX: usize = 1 << 10;

impl Known {
    fn has_object(&self, r: &Ref) -> bool {
        self.objects.lock().unwrap_or_else(|p| p.into_inner()).contains(r)
    }

    /// Objects committed (by this node's transaction that just committed, or
    /// read as present by a transaction that wrote none of them).
    pub(crate) fn add_objects(&self, refs: impl IntoIterator<Item = Ref>) {
        let mut objects = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        for r in refs {
            if objects.len() >= KNOWN_OBJECTS_MAX {
                objects.clear();
            }
            objects.insert(r);
        }
    }

    fn world(&self, r: &Ref) -> Option<World> {
        self.worlds.lock().unwrap_or_else(|p| p.into_inner()).get(r).cloned()
    }

    pub(crate) fn add_world(&self, w: &World) {
        let mut worlds = self.worlds.lock().unwrap_or_else(|p| p.into_inner());
        if worlds.len() >= KNOWN_WORLDS_MAX {
            worlds.clear();
        }
        worlds.insert(w.world_ref, w.clone());
    }
}

pub(crate) fn int(v: u64, what: &str) -> R<i64> {
    i64::try_from(v).map_err(|_| WriteError::InvalidCommit(format!("{what} {v} exceeds what the store can hold")))
}

fn decoded<T: serde::de::DeserializeOwned>(table: &'static str, key: &dyn std::fmt::Display, bytes: &[u8]) -> R<T> {
    rows::decode(table, key, bytes).map_err(|e| WriteError::Read(e.into()))
}

fn bytes32(table: &'static str, key: &dyn std::fmt::Display, v: &[u8]) -> R<Ref> {
    <[u8; 32]>::try_from(v).map(Ref).map_err(|_| {
        WriteError::Read(
            rows::Corruption { table, key: key.to_string(), detail: format!("a {}-byte ref", v.len()) }.into(),
        )
    })
}

impl<'c> PgRows<'c> {
    pub(crate) fn new(conn: &'c mut Conn, node: &'c str, known: &'c Known) -> Self {
        PgRows {
            conn,
            node,
            failure: None,
            absent: HashSet::new(),
            tasks: HashMap::new(),
            inserted: vec![],
            worlds: vec![],
            selected: None,
            next_index: None,
            registry: HashMap::new(),
            pending: vec![],
            pending_tasks: HashSet::new(),
            pending_objects: HashSet::new(),
            chained: vec![],
            moves: Moves::default(),
            unnumbered: HashSet::new(),
            known,
            finished_calls: false,
        }
    }

    fn q(&mut self, sql: &str, params: &[Param<'_>]) -> R<Vec<Row>> {
        match self.conn.query(sql, params) {
            Ok(rows) => Ok(rows),
            Err(e) => {
                let detail = e.to_string();
                self.failure = Some(e);
                Err(WriteError::Storage(detail))
            }
        }
    }

    /// Reads the registry entries the batch's commits will check, in one
    /// statement: each commit then finds its entry here. The rows are read
    /// as `registry_entry` reads them (no lock), only earlier in the batch.
    pub(crate) fn read_registry_entries(&mut self, wanted: &[(&str, &str)]) -> R<()> {
        if wanted.is_empty() {
            return Ok(());
        }
        let registries: Vec<&str> = wanted.iter().map(|(r, _)| *r).collect();
        let ids: Vec<&str> = wanted.iter().map(|(_, id)| *id).collect();
        let rows = self.q(
            "SELECT e.registry, e.transition_id, e.transition_fn FROM registry_entries e
             JOIN unnest($1::text[], $2::text[]) AS w (registry, id) ON e.registry = w.registry AND e.transition_id = w.id",
            &[(&registries, Type::TEXT_ARRAY), (&ids, Type::TEXT_ARRAY)],
        )?;
        for (registry, id) in wanted {
            self.registry.insert((registry.to_string(), id.to_string()), None);
        }
        for row in &rows {
            let (registry, id): (String, String) = (row.get(0), row.get(1));
            let f = bytes32("registry_entries", &id, row.get(2))?;
            self.registry.insert((registry, id), Some(f));
        }
        Ok(())
    }

    /// Writes what the batch deferred to its end: the pending invocations
    /// with the episode summaries the batch moves (`chain_pending`), or the
    /// summaries alone (`write_episodes`).
    pub(crate) fn flush(&mut self) -> R<()> {
        self.chain_pending(true)?;
        self.write_episodes()
    }

    /// `chain_pending` without the summaries: what the batch reads next
    /// sees its entries.
    fn flush_pending(&mut self) -> R<()> {
        self.chain_pending(false)
    }

    /// Chains the pending invocations onto `world/selected`, locked here
    /// (the batch's last lock but the episode summaries), and writes them
    /// all in one statement: their new objects and who they name, entries,
    /// worlds, who those name, the head and their tasks. With `episodes`,
    /// the head's statement also locks the summaries the batch moves, after
    /// the head, and the writing one also writes them and the new calls'
    /// positions: the head is held for two round trips and the COMMIT, as
    /// before calls had positions.
    fn chain_pending(&mut self, episodes: bool) -> R<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        let moves = if episodes { std::mem::take(&mut self.moves) } else { Moves::default() };
        let (head, summaries) = self.lock_head(&moves.episodes().collect::<Vec<_>>())?;
        let head = head.ok_or(WriteError::NoWorld)?;
        let mut world =
            self.world(&head)?.ok_or_else(|| WriteError::Storage(format!("selected head {head} has no world row")))?;
        let mut chained = Vec::with_capacity(pending.len());
        for p in pending {
            let c = chain(&world, p);
            world = c.world.clone();
            chained.push(c);
        }
        // A call created in this batch is written with its position, as
        // its commit leaves it.
        for c in &chained {
            self.tasks.insert(c.key.clone(), c.task.clone());
        }
        let summaries = self.episode_columns(moves, &summaries)?;
        let appended: Vec<Appended> = chained.iter().map(|c| (&c.entry, &c.world, Some((&c.key, &c.task)))).collect();
        self.write_appended(chained.iter().flat_map(|c| &c.objects), &appended, &summaries)?;
        if episodes {
            self.unnumbered.clear();
        }
        self.pending_tasks.clear();
        self.pending_objects.clear();
        self.chained.extend(chained.into_iter().map(|c| c.committed));
        Ok(())
    }

    /// Locks `world/selected` (unless this transaction holds it already)
    /// and then the summaries of `episodes`, in one statement: the head and
    /// the summaries' rows.
    fn lock_head(&mut self, episodes: &[&str]) -> R<(Option<Ref>, Vec<Row>)> {
        if episodes.is_empty() {
            return Ok((self.head(SELECTED_HEAD)?, vec![]));
        }
        if let Some(selected) = self.selected {
            return Ok((selected, self.lock_summaries(episodes)?));
        }
        // The union's branches run in order: the head is locked first.
        let sql = format!(
            "WITH h AS (SELECT ref FROM heads WHERE name = $1 FOR UPDATE), {}
             SELECT NULL::text, ref FROM h UNION ALL SELECT episode, summary FROM s",
            summaries_cte("$2")
        );
        let mut rows = self.q(&sql, &[(&SELECTED_HEAD, Type::TEXT), (&episodes, Type::TEXT_ARRAY)])?;
        let at = rows.iter().position(|r| r.get::<_, Option<&str>>(0).is_none());
        let head = at.map(|i| rows.remove(i)).map(|r| bytes32("heads", &SELECTED_HEAD, r.get(1))).transpose()?;
        if head.is_none() {
            self.absent.insert(("heads", SELECTED_HEAD.to_string()));
        }
        self.selected = Some(head);
        Ok((head, rows))
    }

    /// Locks and reads the summaries of `episodes` (`summaries_cte`).
    fn lock_summaries(&mut self, episodes: &[&str]) -> R<Vec<Row>> {
        let sql = format!("WITH {} SELECT episode, summary FROM s", summaries_cte("$1"));
        self.q(&sql, &[(&episodes, Type::TEXT_ARRAY)])
    }

    /// Applies the batch's moves of the episode index on their own: locks
    /// the summaries they move, then writes the summaries and the new calls'
    /// rows with their positions (`episodes_cte`).
    fn write_episodes(&mut self) -> R<()> {
        if self.moves.is_empty() {
            return Ok(());
        }
        let moves = std::mem::take(&mut self.moves);
        let locked = self.lock_summaries(&moves.episodes().collect::<Vec<_>>())?;
        let columns = self.episode_columns(moves, &locked)?;
        self.q(&format!("WITH {} SELECT 1", episodes_cte(1)), &columns.params())?;
        self.unnumbered.clear();
        Ok(())
    }

    /// The summaries `moves` leave (their rows as locked: `summaries`) and
    /// the new calls' rows with their positions, as `episodes_cte` takes
    /// them.
    fn episode_columns(&self, moves: Moves, summaries: &[Row]) -> R<EpisodeColumns> {
        let mut stored: HashMap<String, EpisodeRow> = HashMap::with_capacity(summaries.len());
        for row in summaries {
            let episode: String = row.get(0);
            let summary = decoded("episodes", &episode, row.get(1))?;
            stored.insert(episode, summary);
        }
        let mut columns = EpisodeColumns::default();
        for episode in moves.into_episodes() {
            let was = stored.remove(&episode.episode);
            let moved = episode.apply(was);
            for (key, seq) in moved.positions {
                let task = self.tasks.get(&key).ok_or_else(|| {
                    WriteError::Storage(format!("task {} was created but is not held", key.invocation_id()))
                })?;
                columns.add_call(key, task, seq)?;
            }
            columns.add_summary(moved.episode, &moved.row, moved.was.is_some())?;
        }
        Ok(columns)
    }

    /// Flushes first when `key` has a pending commit: its row is read or
    /// written as that commit leaves it.
    fn settle(&mut self, key: &TaskKey) -> R<()> {
        if self.pending_tasks.contains(key) { self.flush_pending() } else { Ok(()) }
    }

    /// Appended entries in one statement (one round trip, however many):
    /// their new objects and the refs those name, the entries, their worlds,
    /// who those name, the selected head (the last world), the tasks they
    /// end (but unnumbered ones, which `episodes` writes), and `episodes`
    /// (`episodes_cte`). The head is inserted plainly where this transaction
    /// read it as absent, as `put` does. No two parts touch one row, as a
    /// statement requires.
    fn write_appended<'o>(
        &mut self,
        objects: impl IntoIterator<Item = &'o NewObject>,
        appended: &[Appended<'_>],
        episodes: &EpisodeColumns,
    ) -> R<()> {
        let Some((_, last, _)) = appended.last() else { return Ok(()) };
        let new = self.new_objects(objects);
        let objects = ObjectColumns::of(&new)?;
        let mut columns = EntryColumns::default();
        for (entry, world, task) in appended {
            columns.add(entry, world, task.filter(|(key, _)| !self.unnumbered.contains(*key)))?;
        }
        let head = if self.absent.remove(&("heads", SELECTED_HEAD.to_string())) {
            "INSERT INTO heads (name, ref) VALUES ($22, $23)"
        } else {
            "INSERT INTO heads (name, ref) VALUES ($22, $23) ON CONFLICT (name) DO UPDATE SET ref = excluded.ref"
        };
        let sql = format!(
            "WITH {OBJECTS_CTE}, {episodes},
                  e AS (INSERT INTO log (log_id, entry_index, entry_hash, entry)
                        SELECT 0, i, h, b FROM unnest($10::int8[], $11::bytea[], $12::bytea[]) AS x (i, h, b)),
                  er AS (INSERT INTO referrers (target, kind, position)
                         SELECT t, $14, p FROM unnest($13::bytea[], $15::int8[]) AS r (t, p) ON CONFLICT DO NOTHING),
                  w AS (INSERT INTO worlds (world_ref, revision, world)
                        SELECT r, v, b FROM unnest($16::bytea[], $17::int8[], $18::bytea[]) AS x (r, v, b)),
                  wr AS (INSERT INTO referrers (target, kind, position)
                         SELECT t, $19, p FROM unnest($20::bytea[], $21::int8[]) AS r (t, p) ON CONFLICT DO NOTHING),
                  h AS ({head}),
                  t AS (UPDATE tasks SET state = x.s, task = x.b
                        FROM unnest($24::text[], $25::text[], $26::text[], $27::text[], $28::bytea[]) AS x (su, ep, id, s, b)
                        WHERE tasks.surface = x.su AND tasks.episode = x.ep AND tasks.task_id = x.id)
             SELECT 1",
            episodes = episodes_cte(29)
        );
        let last_ref = last.world_ref.0.as_slice();
        let (entry_kind, world_kind) = (REFERRER_ENTRY as i16, REFERRER_WORLD as i16);
        let mut params = objects.params();
        params.extend_from_slice(&[
            (&columns.indexes, Type::INT8_ARRAY),
            (&columns.hashes, Type::BYTEA_ARRAY),
            (&columns.rows, Type::BYTEA_ARRAY),
            (&columns.named, Type::BYTEA_ARRAY),
            (&entry_kind, Type::INT2),
            (&columns.named_by, Type::INT8_ARRAY),
            (&columns.world_refs, Type::BYTEA_ARRAY),
            (&columns.indexes, Type::INT8_ARRAY),
            (&columns.world_rows, Type::BYTEA_ARRAY),
            (&world_kind, Type::INT2),
            (&columns.world_named, Type::BYTEA_ARRAY),
            (&columns.world_named_by, Type::INT8_ARRAY),
            (&SELECTED_HEAD, Type::TEXT),
            (&last_ref, Type::BYTEA),
            (&columns.surfaces, Type::TEXT_ARRAY),
            (&columns.episodes, Type::TEXT_ARRAY),
            (&columns.task_ids, Type::TEXT_ARRAY),
            (&columns.states, Type::TEXT_ARRAY),
            (&columns.tasks, Type::BYTEA_ARRAY),
        ]);
        params.extend(episodes.params());
        self.q(&sql, &params)?;
        self.inserted.extend(new.iter().map(|o| o.hash));
        for (entry, world, task) in appended {
            self.next_index = Some(entry.header.entry_index + 1);
            self.selected = Some(Some(world.world_ref));
            self.worlds.push((*world).clone());
            if let Some((key, task)) = task {
                self.tasks.insert((*key).clone(), (*task).clone());
            }
        }
        Ok(())
    }

    /// The objects of `objects` not yet in the store as far as this node
    /// knows, each once, in order.
    fn new_objects<'o>(&self, objects: impl IntoIterator<Item = &'o NewObject>) -> Vec<&'o NewObject> {
        let mut new: Vec<&NewObject> = vec![];
        for o in objects {
            if !self.known.has_object(&o.hash)
                && !self.inserted.contains(&o.hash)
                && !new.iter().any(|n| n.hash == o.hash)
            {
                new.push(o);
            }
        }
        new
    }

    /// Notes that `key` of `table` was read as absent (when `rows` is empty).
    fn note_absent(&mut self, table: &'static str, key: String, rows: &[Row]) {
        if rows.is_empty() {
            self.absent.insert((table, key));
        }
    }

    /// Writes a row: a plain insert if this transaction read it as absent (a
    /// unique key then refuses it if another node wrote it meanwhile), an
    /// upsert otherwise (the row is locked, or never read).
    fn put(&mut self, table: &'static str, key: String, insert: &str, conflict: &str, params: &[Param<'_>]) -> R<()> {
        let sql = if self.absent.remove(&(table, key)) { insert.to_string() } else { format!("{insert} {conflict}") };
        self.q(&sql, params)?;
        Ok(())
    }

    /// Inserts a task row owned by this node (`conflict`: what a row already
    /// there does; none, a unique-key refusal), without its position, which
    /// `write_episodes` gives it. Whether it was written.
    fn insert_task_row(&mut self, key: &TaskKey, task: &Task, conflict: &str) -> R<bool> {
        let sql = format!(
            "INSERT INTO tasks (surface, episode, task_id, state, node, task) VALUES ($1, $2, $3, $4, $5, $6) {conflict} RETURNING 1"
        );
        let written = self.exists(
            &sql,
            &[
                (&key.surface.as_str(), Type::TEXT),
                (&key.episode.as_str(), Type::TEXT),
                (&key.task_id.as_str(), Type::TEXT),
                (&task.state.as_str(), Type::TEXT),
                (&self.node.to_string(), Type::TEXT),
                (&rows::encode(task), Type::BYTEA),
            ],
        )?;
        if written {
            self.tasks.insert(key.clone(), task.clone());
        }
        Ok(written)
    }

    /// An approval row; `conflict` says what an existing id means (none: an
    /// engine error, so a batch that raced another writer is retried).
    fn write_approval(&mut self, id: &str, a: &ApprovalRow, conflict: &str) -> R<()> {
        let requested_at = i64::try_from(a.requested_at).unwrap_or(i64::MAX);
        self.q(
            &format!(
                "INSERT INTO approvals (id, credential, digest, episode, state, closed, requested_at, approval) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) {conflict}"
            ),
            &[
                (&id, Type::TEXT),
                (&a.credential.0.as_slice(), Type::BYTEA),
                (&a.digest.0.as_slice(), Type::BYTEA),
                (&a.episode.as_str(), Type::TEXT),
                (&a.state.as_str(), Type::TEXT),
                (&a.closed, Type::BOOL),
                (&requested_at, Type::INT8),
                (&rows::encode(a), Type::BYTEA),
            ],
        )?;
        Ok(())
    }

    /// Writes the moves kept once they are `MOVES_KEPT_MAX`.
    fn write_when_many(&mut self) -> R<()> {
        if self.moves.len() >= MOVES_KEPT_MAX { self.write_episodes() } else { Ok(()) }
    }

    fn exists(&mut self, sql: &str, params: &[Param<'_>]) -> R<bool> {
        Ok(!self.q(sql, params)?.is_empty())
    }
}

/// The refs as a `bytea[]` parameter.
fn ref_array(refs: &[Ref]) -> Vec<&[u8]> {
    refs.iter().map(|r| r.0.as_slice()).collect()
}

impl Rows for PgRows<'_> {
    fn has_object(&mut self, r: &Ref) -> R<bool> {
        if self.known.has_object(r) || self.inserted.contains(r) || self.pending_objects.contains(r) {
            return Ok(true);
        }
        let present = self.exists("SELECT 1 FROM objects WHERE hash = $1", &[(&r.0.as_slice(), Type::BYTEA)])?;
        // Present and not written by this transaction: committed, for good.
        if present {
            self.known.add_objects([*r]);
        }
        Ok(present)
    }

    /// The objects and who they name, in one statement.
    fn insert_objects(&mut self, objects: &[NewObject]) -> R<()> {
        let new = self.new_objects(objects);
        if new.len() <= 1 {
            return new.first().map_or(Ok(()), |o| self.insert_object(o));
        }
        let c = ObjectColumns::of(&new)?;
        self.inserted.extend(new.iter().map(|o| o.hash));
        self.q(&format!("WITH {OBJECTS_CTE} SELECT 1"), &c.params())?;
        Ok(())
    }

    /// The object and who it names, in one statement. If another node wrote
    /// the same object first, it indexed it too, and nothing is written here.
    fn insert_object(&mut self, o: &NewObject) -> R<()> {
        if self.known.has_object(&o.hash) || self.inserted.contains(&o.hash) {
            return Ok(());
        }
        self.inserted.push(o.hash);
        let size = int(o.payload.len() as u64, "payload size")?;
        let named = object_targets(&o.hash, &o.payload);
        self.q(
            "WITH o AS (INSERT INTO objects (hash, interface_hash, semantic_id, provenance, size, payload)
                        VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (hash) DO NOTHING RETURNING seq)
             INSERT INTO referrers (target, kind, position) SELECT t, $8, o.seq FROM o, unnest($7) AS t
             ON CONFLICT DO NOTHING",
            &[
                (&o.hash.0.as_slice(), Type::BYTEA),
                (&o.interface_hash.0.as_slice(), Type::BYTEA),
                (&o.semantic_id.as_str(), Type::TEXT),
                (&o.provenance.as_str(), Type::TEXT),
                (&size, Type::INT8),
                (&o.payload.as_slice(), Type::BYTEA),
                (&ref_array(&named), Type::BYTEA_ARRAY),
                (&(REFERRER_OBJECT as i16), Type::INT2),
            ],
        )?;
        Ok(())
    }

    fn head(&mut self, name: &str) -> R<Option<Ref>> {
        if name == SELECTED_HEAD {
            self.flush_pending()?;
            // Locked by this transaction already: only its own writes moved it since.
            if let Some(selected) = self.selected {
                return Ok(selected);
            }
        }
        let rows = self.q("SELECT ref FROM heads WHERE name = $1 FOR UPDATE", &[(&name, Type::TEXT)])?;
        self.note_absent("heads", name.to_string(), &rows);
        let head = rows.first().map(|r| bytes32("heads", &name, r.get(0))).transpose()?;
        if name == SELECTED_HEAD {
            self.selected = Some(head);
        }
        Ok(head)
    }

    fn set_head(&mut self, name: &str, r: Ref) -> R<()> {
        if name == SELECTED_HEAD {
            self.flush_pending()?;
            self.selected = Some(Some(r));
        }
        self.put(
            "heads",
            name.to_string(),
            "INSERT INTO heads (name, ref) VALUES ($1, $2)",
            "ON CONFLICT (name) DO UPDATE SET ref = excluded.ref",
            &[(&name, Type::TEXT), (&r.0.as_slice(), Type::BYTEA)],
        )
    }

    fn world(&mut self, r: &Ref) -> R<Option<World>> {
        if let Some(w) = self.known.world(r).or_else(|| self.worlds.iter().find(|w| w.world_ref == *r).cloned()) {
            return Ok(Some(w));
        }
        let rows = self.q("SELECT world FROM worlds WHERE world_ref = $1", &[(&r.0.as_slice(), Type::BYTEA)])?;
        let world: Option<World> = rows.first().map(|row| decoded("worlds", r, row.get(0))).transpose()?;
        // A world's ref is the hash of what it holds: once read, it is that world for good.
        if let Some(w) = &world {
            self.known.add_world(w);
        }
        Ok(world)
    }

    /// With `world/selected` locked, the log ends at its world's revision
    /// (every append moves it in the same transaction); asked otherwise.
    fn log_len(&mut self) -> R<u64> {
        self.flush_pending()?;
        if let Some(next) = self.next_index {
            return Ok(next);
        }
        if let Some(Some(head)) = self.selected
            && let Some(world) = self.world(&head)?
        {
            return Ok(world.revision + 1);
        }
        let rows = self.q("SELECT max(entry_index) FROM log WHERE log_id = 0", &[])?;
        let last: Option<i64> = rows.first().and_then(|r| r.get(0));
        Ok(last.map_or(0, |i| i as u64 + 1))
    }

    fn insert_entry(&mut self, entry: &LogEntry) -> R<()> {
        let h = &entry.header;
        let index = int(h.entry_index, "entry index")?;
        self.next_index = Some(h.entry_index + 1);
        let named = entry_targets(entry);
        self.q(
            "WITH e AS (INSERT INTO log (log_id, entry_index, entry_hash, entry) VALUES (0, $1, $2, $3) RETURNING entry_index)
             INSERT INTO referrers (target, kind, position) SELECT t, $5, e.entry_index FROM e, unnest($4) AS t
             ON CONFLICT DO NOTHING",
            &[
                (&index, Type::INT8),
                (&entry.entry_hash.0.as_slice(), Type::BYTEA),
                (&rows::encode(entry), Type::BYTEA),
                (&ref_array(&named), Type::BYTEA_ARRAY),
                (&(REFERRER_ENTRY as i16), Type::INT2),
            ],
        )?;
        Ok(())
    }

    fn insert_world(&mut self, world: &World) -> R<()> {
        let revision = int(world.revision, "revision")?;
        self.worlds.push(world.clone());
        self.q(
            "WITH w AS (INSERT INTO worlds (world_ref, revision, world) VALUES ($1, $2, $3) RETURNING revision)
             INSERT INTO referrers (target, kind, position) SELECT t, $5, w.revision FROM w, unnest($4) AS t
             ON CONFLICT DO NOTHING",
            &[
                (&world.world_ref.0.as_slice(), Type::BYTEA),
                (&revision, Type::INT8),
                (&rows::encode(world), Type::BYTEA),
                (&ref_array(&world_targets(world)), Type::BYTEA_ARRAY),
                (&(REFERRER_WORLD as i16), Type::INT2),
            ],
        )?;
        Ok(())
    }

    /// A commit's writes in one statement (see `write_appended`).
    fn append(&mut self, a: Append<'_>) -> R<()> {
        self.write_appended(a.objects, &[(a.entry, a.world, a.task)], &EpisodeColumns::default())
    }

    /// Without a lock: a world once selected stays so.
    fn world_selected(&mut self) -> R<bool> {
        use std::sync::atomic::Ordering::Relaxed;
        if matches!(self.selected, Some(Some(_))) || !self.pending.is_empty() || self.known.selected.load(Relaxed) {
            return Ok(true);
        }
        let seen = self.exists("SELECT 1 FROM heads WHERE name = $1", &[(&SELECTED_HEAD, Type::TEXT)])?;
        self.known.selected.fetch_or(seen, Relaxed);
        Ok(seen)
    }

    /// Deferred to `flush`: the answer is a placeholder until then.
    fn append_invocation(&mut self, p: Pending) -> R<Committed> {
        let answer = placeholder(self.chained.len() + self.pending.len(), p.commit.state_root);
        self.pending_tasks.insert(p.commit.task.clone());
        self.pending_objects.extend(p.commit.objects.iter().map(|o| o.hash));
        self.pending.push(p);
        Ok(answer)
    }

    fn registry_entry(&mut self, registry: &str, id: &str) -> R<Option<Ref>> {
        if let Some(entry) = self.registry.get(&(registry.to_string(), id.to_string())) {
            return Ok(*entry);
        }
        let rows = self.q(
            "SELECT transition_fn FROM registry_entries WHERE registry = $1 AND transition_id = $2",
            &[(&registry, Type::TEXT), (&id, Type::TEXT)],
        )?;
        rows.first().map(|r| bytes32("registry_entries", &id, r.get(0))).transpose()
    }

    fn put_registry_entry(&mut self, registry: &str, id: &str, transition_fn: Ref) -> R<()> {
        self.registry.insert((registry.to_string(), id.to_string()), Some(transition_fn));
        self.q(
            "INSERT INTO registry_entries (registry, transition_id, transition_fn) VALUES ($1, $2, $3)
             ON CONFLICT (registry, transition_id) DO UPDATE SET transition_fn = excluded.transition_fn",
            &[(&registry, Type::TEXT), (&id, Type::TEXT), (&transition_fn.0.as_slice(), Type::BYTEA)],
        )?;
        Ok(())
    }

    fn replace_registry_entries(&mut self, registry: &str, entries: &[(String, Ref)]) -> R<()> {
        self.registry.retain(|(r, _), _| r != registry);
        self.q("DELETE FROM registry_entries WHERE registry = $1", &[(&registry, Type::TEXT)])?;
        let ids: Vec<&str> = entries.iter().map(|(id, _)| id.as_str()).collect();
        let fns: Vec<&[u8]> = entries.iter().map(|(_, f)| f.0.as_slice()).collect();
        self.q(
            "INSERT INTO registry_entries (registry, transition_id, transition_fn)
             SELECT $1, id, f FROM unnest($2::text[], $3::bytea[]) AS e (id, f)",
            &[(&registry, Type::TEXT), (&ids, Type::TEXT_ARRAY), (&fns, Type::BYTEA_ARRAY)],
        )?;
        Ok(())
    }

    fn task(&mut self, key: &TaskKey) -> R<Option<Task>> {
        self.settle(key)?;
        if let Some(task) = self.tasks.get(key) {
            return Ok(Some(task.clone()));
        }
        let rows = self.q(
            "SELECT task FROM tasks WHERE surface = $1 AND episode = $2 AND task_id = $3 FOR UPDATE",
            &[
                (&key.surface.as_str(), Type::TEXT),
                (&key.episode.as_str(), Type::TEXT),
                (&key.task_id.as_str(), Type::TEXT),
            ],
        )?;
        let task: Option<Task> = rows.first().map(|r| decoded("tasks", &key.invocation_id(), r.get(0))).transpose()?;
        if let Some(task) = &task {
            self.tasks.insert(key.clone(), task.clone());
        }
        Ok(task)
    }

    /// One statement when the key is new (the usual case); a row another
    /// node is inserting is waited for, then read.
    fn create_task(&mut self, key: &TaskKey, task: &Task) -> R<Option<Task>> {
        self.settle(key)?;
        if let Some(existing) = self.tasks.get(key) {
            return Ok(Some(existing.clone()));
        }
        if !self.insert_task_row(key, task, "ON CONFLICT (surface, episode, task_id) DO NOTHING")? {
            return self.task(key);
        }
        Ok(None)
    }

    fn insert_task(&mut self, key: &TaskKey, task: &Task) -> R<()> {
        self.settle(key)?;
        self.insert_task_row(key, task, "").map(|_| ())
    }

    /// Kept until the batch's end (`write_episodes`).
    fn call_created(&mut self, key: &TaskKey, task: &Task) -> R<()> {
        self.moves.created(key, task);
        self.unnumbered.insert(key.clone());
        self.write_when_many()
    }

    fn call_ended(&mut self, key: &TaskKey, task: &Task) -> R<()> {
        self.moves.ended(key, task);
        self.write_when_many()
    }

    fn journal(&mut self, invocation_id: &str) -> R<Vec<JournalItem>> {
        let rows = self.q(super::JOURNAL_OF, &[(&invocation_id, Type::TEXT)])?;
        super::journal_items(invocation_id, &rows).map_err(|c| WriteError::Read(c.into()))
    }

    fn update_task(&mut self, key: &TaskKey, task: &Task) -> R<()> {
        self.settle(key)?;
        self.tasks.insert(key.clone(), task.clone());
        if self.unnumbered.contains(key) {
            return Ok(());
        }
        self.q(
            "UPDATE tasks SET state = $4, task = $5 WHERE surface = $1 AND episode = $2 AND task_id = $3",
            &[
                (&key.surface.as_str(), Type::TEXT),
                (&key.episode.as_str(), Type::TEXT),
                (&key.task_id.as_str(), Type::TEXT),
                (&task.state.as_str(), Type::TEXT),
                (&rows::encode(task), Type::BYTEA),
            ],
        )?;
        Ok(())
    }

    /// Started tasks of nodes that lost their lease (gone, or cut off from the
    /// database). A live node's calls in flight, this node's own among them,
    /// are never touched.
    fn open_tasks(&mut self) -> R<Vec<TaskKey>> {
        self.flush_pending()?;
        let rows = self.q(
            "SELECT t.surface, t.episode, t.task_id FROM tasks t LEFT JOIN nodes n ON n.node_id = t.node
             WHERE t.state = 'started' AND t.node <> $1 AND (n.node_id IS NULL OR n.lease_until < now())
             ORDER BY 1, 2, 3 LIMIT $2",
            &[(&self.node.to_string(), Type::TEXT), (&RECOVERY_ROWS_MAX, Type::INT8)],
        )?;
        Ok(rows
            .iter()
            .filter_map(|r| {
                let surface = Surface::parse(r.get(0))?;
                Some(TaskKey { surface, episode: r.get(1), task_id: r.get(2) })
            })
            .collect())
    }

    /// The open set is derived (a started task), so there is nothing to close.
    fn close_task(&mut self, key: &TaskKey) -> R<()> {
        self.settle(key)?;
        Ok(())
    }

    fn has_intent(&mut self, invocation_id: &str, ordinal: u32) -> R<bool> {
        self.exists(
            "SELECT 1 FROM intents WHERE invocation_id = $1 AND ordinal = $2",
            &[(&invocation_id, Type::TEXT), (&(ordinal as i32), Type::INT4)],
        )
    }

    fn has_intents(&mut self, invocation_id: &str) -> R<bool> {
        self.exists("SELECT 1 FROM intents WHERE invocation_id = $1 LIMIT 1", &[(&invocation_id, Type::TEXT)])
    }

    fn insert_intent(&mut self, invocation_id: &str, ordinal: u32, intent: &EffectIntent) -> R<()> {
        self.q(
            "INSERT INTO intents (invocation_id, ordinal, intent) VALUES ($1, $2, $3)",
            &[(&invocation_id, Type::TEXT), (&(ordinal as i32), Type::INT4), (&rows::encode(intent), Type::BYTEA)],
        )?;
        Ok(())
    }

    fn has_outcome(&mut self, invocation_id: &str, ordinal: u32) -> R<bool> {
        self.exists(
            "SELECT 1 FROM outcomes WHERE invocation_id = $1 AND ordinal = $2",
            &[(&invocation_id, Type::TEXT), (&(ordinal as i32), Type::INT4)],
        )
    }

    fn insert_outcome(&mut self, invocation_id: &str, ordinal: u32, outcome: &EffectOutcome) -> R<()> {
        let ordinal = ordinal as i32;
        self.q(
            "INSERT INTO outcomes (invocation_id, ordinal, outcome) VALUES ($1, $2, $3)",
            &[(&invocation_id, Type::TEXT), (&ordinal, Type::INT4), (&rows::encode(outcome), Type::BYTEA)],
        )?;
        if let Some(record) = outcome.record_ref {
            self.q(
                "INSERT INTO record_journal (record, invocation_id, ordinal) VALUES ($1, $2, $3)
                 ON CONFLICT (record) DO UPDATE SET invocation_id = excluded.invocation_id, ordinal = excluded.ordinal
                 WHERE (excluded.invocation_id COLLATE \"C\", excluded.ordinal)
                     < (record_journal.invocation_id COLLATE \"C\", record_journal.ordinal)",
                &[(&record.0.as_slice(), Type::BYTEA), (&invocation_id, Type::TEXT), (&ordinal, Type::INT4)],
            )?;
        }
        Ok(())
    }

    /// Intents without an outcome, of the calls of nodes that lost their
    /// lease: of the tasks `open_tasks` returns, and with `finished_calls` of
    /// their tasks no longer started too (a call may commit or end before an
    /// effect's outcome is journaled; recovery resolves that intent as well).
    fn open_intents(&mut self) -> R<Vec<(String, u32)>> {
        self.flush_pending()?;
        if self.finished_calls {
            // From the intents without an outcome to their task (an invocation
            // id is `surface:episode:taskId`; surface and episode hold no ':').
            let rows = self.q(
                "SELECT i.invocation_id, i.ordinal FROM intents i
                 JOIN tasks t ON t.surface = split_part(i.invocation_id, ':', 1)
                   AND t.episode = split_part(i.invocation_id, ':', 2)
                   AND t.task_id = substr(i.invocation_id, length(t.surface) + length(t.episode) + 3)
                 LEFT JOIN nodes n ON n.node_id = t.node
                 WHERE t.node <> $1 AND (n.node_id IS NULL OR n.lease_until < now())
                   AND NOT EXISTS (SELECT 1 FROM outcomes o WHERE o.invocation_id = i.invocation_id AND o.ordinal = i.ordinal)
                 ORDER BY 1, 2 LIMIT $2",
                &[(&self.node.to_string(), Type::TEXT), (&RECOVERY_ROWS_MAX, Type::INT8)],
            )?;
            return Ok(rows.iter().map(|r| (r.get(0), r.get::<_, i32>(1) as u32)).collect());
        }
        let rows = self.q(
            "SELECT i.invocation_id, i.ordinal FROM tasks t LEFT JOIN nodes n ON n.node_id = t.node
             JOIN intents i ON i.invocation_id = t.surface || ':' || t.episode || ':' || t.task_id
             WHERE t.state = 'started' AND t.node <> $1 AND (n.node_id IS NULL OR n.lease_until < now())
               AND NOT EXISTS (SELECT 1 FROM outcomes o WHERE o.invocation_id = i.invocation_id AND o.ordinal = i.ordinal)
             ORDER BY 1, 2 LIMIT $2",
            &[(&self.node.to_string(), Type::TEXT), (&RECOVERY_ROWS_MAX, Type::INT8)],
        )?;
        Ok(rows.iter().map(|r| (r.get(0), r.get::<_, i32>(1) as u32)).collect())
    }

    /// Derived too: an intent is open while it has no outcome.
    fn close_intent(&mut self, _invocation_id: &str, _ordinal: u32) -> R<()> {
        Ok(())
    }

    fn spent(&mut self, episode: &str, effect: &str, scope: &str) -> R<u64> {
        let rows = self.q(
            "SELECT units FROM spend WHERE episode = $1 AND effect = $2 AND scope = $3 FOR UPDATE",
            &[(&episode, Type::TEXT), (&effect, Type::TEXT), (&scope, Type::TEXT)],
        )?;
        self.note_absent("spend", format!("{episode}\0{effect}\0{scope}"), &rows);
        Ok(rows.first().map_or(0, |r| r.get::<_, i64>(0) as u64))
    }

    fn set_spent(&mut self, episode: &str, effect: &str, scope: &str, units: u64) -> R<()> {
        let units = int(units, "units spent")?;
        self.put(
            "spend",
            format!("{episode}\0{effect}\0{scope}"),
            "INSERT INTO spend (episode, effect, scope, units) VALUES ($1, $2, $3, $4)",
            "ON CONFLICT (episode, effect, scope) DO UPDATE SET units = excluded.units",
            &[(&episode, Type::TEXT), (&effect, Type::TEXT), (&scope, Type::TEXT), (&units, Type::INT8)],
        )
    }

    fn has_session(&mut self, credential_id: &Ref) -> R<bool> {
        self.exists("SELECT 1 FROM sessions WHERE credential_id = $1", &[(&credential_id.0.as_slice(), Type::BYTEA)])
    }

    fn insert_session(&mut self, credential_id: &Ref, session: &Session) -> R<()> {
        self.q(
            "INSERT INTO sessions (credential_id, session, episode) VALUES ($1, $2, $3)",
            &[
                (&credential_id.0.as_slice(), Type::BYTEA),
                (&rows::encode(session), Type::BYTEA),
                (&session.episode.as_str(), Type::TEXT),
            ],
        )?;
        Ok(())
    }

    fn remove_session(&mut self, credential_id: &Ref) -> R<bool> {
        self.exists(
            "DELETE FROM sessions WHERE credential_id = $1 RETURNING 1",
            &[(&credential_id.0.as_slice(), Type::BYTEA)],
        )
    }

    fn receipt(&mut self, id: &str) -> R<Option<Receipt>> {
        let rows = self.q("SELECT receipt FROM receipts WHERE id = $1 FOR UPDATE", &[(&id, Type::TEXT)])?;
        self.note_absent("receipts", id.to_string(), &rows);
        rows.first().map(|r| decoded("receipts", &id, r.get(0))).transpose()
    }

    fn put_receipt(&mut self, id: &str, receipt: &Receipt) -> R<()> {
        self.put(
            "receipts",
            id.to_string(),
            "INSERT INTO receipts (id, receipt) VALUES ($1, $2)",
            "ON CONFLICT (id) DO UPDATE SET receipt = excluded.receipt",
            &[(&id, Type::TEXT), (&rows::encode(receipt), Type::BYTEA)],
        )
    }

    fn remove_receipt(&mut self, id: &str) -> R<()> {
        self.q("DELETE FROM receipts WHERE id = $1", &[(&id, Type::TEXT)])?;
        Ok(())
    }
}

/// A CTE `s` that locks and reads the episode summaries named by the
/// `text[]` parameter `names` ($n), in the episodes' byte order: every
/// node's order, so that two batches never wait on each other for them.
fn summaries_cte(names: &str) -> String {
    format!(
        "s AS (SELECT episode, summary FROM episodes WHERE episode = ANY({names}::text[])
               ORDER BY episode COLLATE \"C\" FOR UPDATE)"
    )
}

/// Objects and the refs they name, inserted from arrays ($1-$9; see
/// `ObjectColumns::params`): only rows new to the database are numbered and
/// indexed (another node that wrote an object first indexed it too).
/// WITH ORDINALITY keeps the given order: objects are numbered in the order
/// written.
const OBJECTS_CTE: &str = "o AS (INSERT INTO objects (hash, interface_hash, semantic_id, provenance, size, payload)
        SELECT h, i, s, p, z, b FROM unnest($1::bytea[], $2::bytea[], $3::text[], $4::text[], $5::int8[], $6::bytea[])
            WITH ORDINALITY AS n (h, i, s, p, z, b, k)
        ORDER BY k
        ON CONFLICT (hash) DO NOTHING RETURNING hash, seq),
    orf AS (INSERT INTO referrers (target, kind, position)
        SELECT r.t, $9, o.seq FROM o JOIN unnest($7::bytea[], $8::bytea[]) AS r (owner, t) ON r.owner = o.hash
        ON CONFLICT DO NOTHING)";

/// New objects as the columns `OBJECTS_CTE` takes.
struct ObjectColumns<'o> {
    hashes: Vec<&'o [u8]>,
    interfaces: Vec<&'o [u8]>,
    semantic: Vec<&'o str>,
    provenance: Vec<&'o str>,
    sizes: Vec<i64>,
    payloads: Vec<&'o [u8]>,
    owners: Vec<&'o [u8]>,
    targets: Vec<Vec<u8>>,
}

const OBJECT_KIND: i16 = REFERRER_OBJECT as i16;

impl<'o> ObjectColumns<'o> {
    fn of(new: &[&'o NewObject]) -> R<ObjectColumns<'o>> {
        let mut sizes = Vec::with_capacity(new.len());
        for o in new {
            sizes.push(int(o.payload.len() as u64, "payload size")?);
        }
        let (mut owners, mut targets) = (vec![], vec![]);
        for o in new {
            for t in object_targets(&o.hash, &o.payload) {
                owners.push(o.hash.0.as_slice());
                targets.push(t.0.to_vec());
            }
        }
        Ok(ObjectColumns {
            hashes: new.iter().map(|o| o.hash.0.as_slice()).collect(),
            interfaces: new.iter().map(|o| o.interface_hash.0.as_slice()).collect(),
            semantic: new.iter().map(|o| o.semantic_id.as_str()).collect(),
            provenance: new.iter().map(|o| o.provenance.as_str()).collect(),
            sizes,
            payloads: new.iter().map(|o| o.payload.as_slice()).collect(),
            owners,
            targets,
        })
    }

    /// $1-$9 of `OBJECTS_CTE`.
    fn params(&self) -> Vec<Param<'_>> {
        vec![
            (&self.hashes, Type::BYTEA_ARRAY),
            (&self.interfaces, Type::BYTEA_ARRAY),
            (&self.semantic, Type::TEXT_ARRAY),
            (&self.provenance, Type::TEXT_ARRAY),
            (&self.sizes, Type::INT8_ARRAY),
            (&self.payloads, Type::BYTEA_ARRAY),
            (&self.owners, Type::BYTEA_ARRAY),
            (&self.targets, Type::BYTEA_ARRAY),
            (&OBJECT_KIND, Type::INT2),
        ]
    }
}

/// CTEs writing episode summaries and new calls' rows with their positions
/// from arrays, numbered from `$first` (see `EpisodeColumns::params`): new
/// episodes inserted plainly (a unique key refuses one another node wrote
/// meanwhile), locked ones updated, and each new call's row with its
/// position and as the batch leaves it.
fn episodes_cte(first: usize) -> String {
    let p = |i: usize| format!("${}", first + i);
    format!(
        "en AS (INSERT INTO episodes (episode, last_at, summary)
                SELECT * FROM unnest({0}::text[], {1}::int8[], {2}::bytea[])),
            eu AS (UPDATE episodes SET last_at = x.l, summary = x.s
                FROM unnest({3}::text[], {4}::int8[], {5}::bytea[]) AS x (e, l, s) WHERE episodes.episode = x.e),
            ec AS (UPDATE tasks SET seq = x.q, state = x.st, task = x.b
                FROM unnest({6}::text[], {7}::text[], {8}::text[], {9}::int8[], {10}::text[], {11}::bytea[])
                    AS x (su, ep, id, q, st, b)
                WHERE tasks.surface = x.su AND tasks.episode = x.ep AND tasks.task_id = x.id)",
        p(0),
        p(1),
        p(2),
        p(3),
        p(4),
        p(5),
        p(6),
        p(7),
        p(8),
        p(9),
        p(10),
        p(11)
    )
}

/// What `episodes_cte` writes, as its columns.
#[derive(Default)]
struct EpisodeColumns {
    new: SummaryColumns,
    old: SummaryColumns,
    surfaces: Vec<&'static str>,
    episodes: Vec<String>,
    task_ids: Vec<String>,
    seqs: Vec<i64>,
    states: Vec<&'static str>,
    tasks: Vec<Vec<u8>>,
}

#[derive(Default)]
struct SummaryColumns {
    episodes: Vec<String>,
    last_at: Vec<i64>,
    rows: Vec<Vec<u8>>,
}

impl EpisodeColumns {
    /// A summary, stored already (an update) or new (an insert).
    fn add_summary(&mut self, episode: String, row: &EpisodeRow, stored: bool) -> R<()> {
        let to = if stored { &mut self.old } else { &mut self.new };
        to.last_at.push(int(row.last_at, "an episode's last activity")?);
        to.rows.push(rows::encode(row));
        to.episodes.push(episode);
        Ok(())
    }

    fn add_call(&mut self, key: TaskKey, task: &Task, seq: u64) -> R<()> {
        self.seqs.push(int(seq, "a call's position")?);
        self.surfaces.push(key.surface.as_str());
        self.episodes.push(key.episode);
        self.task_ids.push(key.task_id);
        self.states.push(task.state.as_str());
        self.tasks.push(rows::encode(task));
        Ok(())
    }

    /// Its parameters, in `episodes_cte`'s order.
    fn params(&self) -> Vec<Param<'_>> {
        vec![
            (&self.new.episodes, Type::TEXT_ARRAY),
            (&self.new.last_at, Type::INT8_ARRAY),
            (&self.new.rows, Type::BYTEA_ARRAY),
            (&self.old.episodes, Type::TEXT_ARRAY),
            (&self.old.last_at, Type::INT8_ARRAY),
            (&self.old.rows, Type::BYTEA_ARRAY),
            (&self.surfaces, Type::TEXT_ARRAY),
            (&self.episodes, Type::TEXT_ARRAY),
            (&self.task_ids, Type::TEXT_ARRAY),
            (&self.seqs, Type::INT8_ARRAY),
            (&self.states, Type::TEXT_ARRAY),
            (&self.tasks, Type::BYTEA_ARRAY),
        ]
    }
}

/// Placeholder answers count down from here; no log reaches them.
const PLACEHOLDER_TOP: u64 = u64::MAX;
const PLACEHOLDERS_MAX: u64 = 1 << 32;

/// The answer standing for the `n`th invocation this transaction defers,
/// until `flush` chains it (see `placeholder_of`).
fn placeholder(n: usize, output_ref: Ref) -> Committed {
    Committed { entry_index: PLACEHOLDER_TOP - n as u64, entry_hash: Ref([0; 32]), world_ref: Ref([0; 32]), output_ref }
}

/// Which deferred invocation an answer stands for, if it is a placeholder.
pub(crate) fn placeholder_of(c: &Committed) -> Option<usize> {
    let n = PLACEHOLDER_TOP - c.entry_index;
    (n < PLACEHOLDERS_MAX && c.entry_hash == Ref([0; 32])).then_some(n as usize)
}

/// An appended entry, its world and the task it ends, if any.
type Appended<'a> = (&'a LogEntry, &'a World, Option<(&'a TaskKey, &'a Task)>);

/// Appended entries as the columns `write_appended` takes.
#[derive(Default)]
struct EntryColumns {
    indexes: Vec<i64>,
    hashes: Vec<Vec<u8>>,
    rows: Vec<Vec<u8>>,
    named: Vec<Vec<u8>>,
    named_by: Vec<i64>,
    world_refs: Vec<Vec<u8>>,
    world_rows: Vec<Vec<u8>>,
    world_named: Vec<Vec<u8>>,
    world_named_by: Vec<i64>,
    surfaces: Vec<&'static str>,
    episodes: Vec<String>,
    task_ids: Vec<String>,
    states: Vec<&'static str>,
    tasks: Vec<Vec<u8>>,
}

impl EntryColumns {
    fn add(&mut self, e: &LogEntry, w: &World, task: Option<(&TaskKey, &Task)>) -> R<()> {
        let index = int(e.header.entry_index, "entry index")?;
        self.indexes.push(index);
        self.hashes.push(e.entry_hash.0.to_vec());
        self.rows.push(rows::encode(e));
        for t in entry_targets(e) {
            self.named.push(t.0.to_vec());
            self.named_by.push(index);
        }
        self.world_refs.push(w.world_ref.0.to_vec());
        self.world_rows.push(rows::encode(w));
        for t in world_targets(w) {
            self.world_named.push(t.0.to_vec());
            self.world_named_by.push(index);
        }
        if let Some((key, task)) = task {
            self.surfaces.push(key.surface.as_str());
            self.episodes.push(key.episode.clone());
            self.task_ids.push(key.task_id.clone());
            self.states.push(task.state.as_str());
            self.tasks.push(rows::encode(task));
        }
        Ok(())
    }
}

impl ApprovalRows for PgRows<'_> {
    fn approval(&mut self, id: &str) -> R<Option<ApprovalRow>> {
        let rows = self.q("SELECT approval FROM approvals WHERE id = $1 FOR UPDATE", &[(&id, Type::TEXT)])?;
        rows.first().map(|r| decoded("approvals", &id, r.get(0))).transpose()
    }

    fn open_approval(&mut self, credential: &Ref, digest: &Ref) -> R<Option<String>> {
        let rows = self.q(
            "SELECT id FROM approvals WHERE credential = $1 AND digest = $2 AND NOT closed FOR UPDATE",
            &[(&credential.0.as_slice(), Type::BYTEA), (&digest.0.as_slice(), Type::BYTEA)],
        )?;
        Ok(rows.first().map(|r| r.get::<_, String>(0)))
    }

    fn open_approvals(&mut self) -> R<u64> {
        let rows = self.q("SELECT count(*) FROM approvals WHERE NOT closed", &[])?;
        Ok(rows.first().map(|r| r.get::<_, i64>(0)).unwrap_or(0).max(0) as u64)
    }

    fn open_approvals_of(&mut self, credential: &Ref, max: u64) -> R<u64> {
        let rows = self.q(
            "SELECT count(*) FROM (SELECT 1 FROM approvals WHERE credential = $1 AND NOT closed LIMIT $2) AS held",
            &[(&credential.0.as_slice(), Type::BYTEA), (&(max as i64), Type::INT8)],
        )?;
        Ok(rows.first().map(|r| r.get::<_, i64>(0)).unwrap_or(0).max(0) as u64)
    }

    fn open_approvals_in(&mut self, episode: &str, max: u64) -> R<u64> {
        let rows = self.q(
            "SELECT count(*) FROM (SELECT 1 FROM approvals WHERE episode = $1 AND NOT closed LIMIT $2) AS held",
            &[(&episode, Type::TEXT), (&(max as i64), Type::INT8)],
        )?;
        Ok(rows.first().map(|r| r.get::<_, i64>(0)).unwrap_or(0).max(0) as u64)
    }

    fn open_approval_rows(&mut self, credential: Option<&Ref>, limit: usize) -> R<Vec<(String, ApprovalRow)>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        // In the embedded engine's key order, so that a bounded pass takes the same rows.
        let rows = match credential {
            Some(c) => self.q(
                "SELECT id, approval FROM approvals WHERE credential = $1 AND NOT closed \
                 ORDER BY credential, digest LIMIT $2 FOR UPDATE",
                &[(&c.0.as_slice(), Type::BYTEA), (&limit, Type::INT8)],
            )?,
            None => self.q(
                "SELECT id, approval FROM approvals WHERE NOT closed ORDER BY credential, digest LIMIT $1 FOR UPDATE",
                &[(&limit, Type::INT8)],
            )?,
        };
        rows.iter()
            .map(|r| {
                let id: String = r.get(0);
                let row = decoded("approvals", &id, r.get(1))?;
                Ok((id, row))
            })
            .collect()
    }

    fn insert_approval(&mut self, id: &str, approval: &ApprovalRow) -> R<()> {
        self.write_approval(id, approval, "")
    }

    fn update_approval(&mut self, id: &str, approval: &ApprovalRow) -> R<()> {
        self.write_approval(
            id,
            approval,
            "ON CONFLICT (id) DO UPDATE SET state = excluded.state, closed = excluded.closed, approval = excluded.approval",
        )
    }

    fn put_approval_wait(&mut self, credential: &Ref, task_id: &str, id: &str) -> R<()> {
        self.q(
            "INSERT INTO approval_waits (credential, task_id, approval) VALUES ($1, $2, $3) \
             ON CONFLICT (credential, task_id) DO UPDATE SET approval = excluded.approval",
            &[(&credential.0.as_slice(), Type::BYTEA), (&task_id, Type::TEXT), (&id, Type::TEXT)],
        )?;
        Ok(())
    }

    fn insert_approval_object(&mut self, o: &NewObject) -> R<()> {
        self.insert_object(o)
    }

    fn secret(&mut self, name: &str) -> R<Option<Vec<u8>>> {
        let rows = self.q("SELECT value FROM secrets WHERE name = $1", &[(&name, Type::TEXT)])?;
        Ok(rows.first().map(|r| r.get::<_, Vec<u8>>(0)))
    }

    fn insert_secret(&mut self, name: &str, value: &[u8]) -> R<()> {
        // Two nodes making it at once: the second insert fails and its batch
        // is retried, then finds the first one's.
        self.q("INSERT INTO secrets (name, value) VALUES ($1, $2)", &[(&name, Type::TEXT), (&value, Type::BYTEA)])?;
        Ok(())
    }
}

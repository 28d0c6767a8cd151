//! What World's tools changed in an episode's worktree since its last command
//! ran: the writes and edits a person asked to approve a command should see,
//! since the command runs over them. Read from the episode's calls, newest
//! first, back to its last command that ran (or `LOOKBACK_CALLS` calls).

use crate::effects::worktree::{EXEC, WRITE};
use serde_json::Value;
use world_store::{EffectStatus, ReadError, Snapshot, canonical};

/// Calls read back, at most, to find the changes.
pub const LOOKBACK_CALLS: u64 = 64;
/// Calls read at a time, newest first: a command that ran lately ends the
/// walk after one small read instead of decoding `LOOKBACK_CALLS` tasks.
const CALLS_PER_READ: u64 = 8;
/// Changes named in one question, at most (the rest are counted).
pub const CHANGES_SHOWN_MAX: usize = 16;

/// The writes and edits of `episode` since its last command ran, oldest first.
pub fn since_last_command(snap: &Snapshot, episode: &str) -> Result<Vec<String>, ReadError> {
    let mut upper = snap.episode(episode)?.map_or(0, |row| row.calls);
    let floor = upper.saturating_sub(LOOKBACK_CALLS);
    let mut changes = vec![];
    'calls: while upper > floor {
        let from = upper.saturating_sub(CALLS_PER_READ).max(floor);
        let effects = snap.episode_calls(episode, from, (upper - from) as usize)?.into_iter().flat_map(|c| c.2.effects);
        for e in effects.rev() {
            let ran = matches!(e.status, EffectStatus::Ok | EffectStatus::Failed | EffectStatus::Indeterminate);
            match (e.effect.as_str(), e.request) {
                (EXEC, _) if ran => break 'calls,
                (WRITE, Some(request)) if ran => changes.push(described(snap, &request)?),
                _ => {}
            }
        }
        upper = from;
    }
    changes.reverse();
    if changes.len() > CHANGES_SHOWN_MAX {
        let more = changes.len() - CHANGES_SHOWN_MAX;
        changes.drain(..more);
        changes.insert(0, format!("{more} earlier change(s)"));
    }
    Ok(changes)
}

/// One write or edit in words: the op, the path, and a write's size.
fn described(snap: &Snapshot, request: &world_store::Ref) -> Result<String, ReadError> {
    let bytes = snap.payload(request)?.unwrap_or_default();
    let payload: Option<Value> = canonical::parse_request(&bytes).and_then(|r| serde_json::from_slice(r.payload).ok());
    let field = |k: &str| payload.as_ref().and_then(|p| p.get(k)).and_then(Value::as_str).unwrap_or("").to_string();
    Ok(match field("op").as_str() {
        "write" => format!("write {} ({} bytes)", field("path"), field("content").len()),
        "edit" => format!("edit {}", field("path")),
        op => format!("{op} {}", field("path")),
    })
}

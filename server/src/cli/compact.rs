//! `worldd compact`: gives a store's free pages back to the file system.
//! Offline: a daemon owns its store's file, so compaction beside one is refused.

use super::fail;
use std::path::Path;
use std::process::ExitCode;

pub fn run(db: &Path) -> ExitCode {
    match world_store::compact(db) {
        Ok(c) => {
            // What the open before compaction recovered, said as `serve` says it.
            if c.replayed_frames > 0 {
                note!("compact: replayed {} frame(s) of the write-ahead log after an unclean stop", c.replayed_frames);
            }
            for effect in &c.recovery.indeterminate_effects {
                note!(
                    "compact: recovery: effect intent {effect} had no outcome; recorded indeterminate (its debit stands)"
                );
            }
            for (task, state) in &c.recovery.tasks {
                note!("compact: recovery: task {task} was in flight at the last stop; now {}", state.as_str());
            }
            let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
            say!(
                "compacted {}: {:.2} MiB -> {:.2} MiB ({:.2} MiB given back)",
                db.display(),
                mib(c.before),
                mib(c.after),
                mib(c.before.saturating_sub(c.after))
            );
            ExitCode::SUCCESS
        }
        Err(e @ world_store::OpenError::Locked { .. }) => {
            fail(2, format!("compact: {e}; a daemon is running on this store: stop it, compact, start it again"))
        }
        Err(e) => fail(2, format!("compact: {e}")),
    }
}

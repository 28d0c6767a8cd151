//! What a worktree holds, as one digest: what an approval of a command binds,
//! so that a command approved over one worktree never runs over another. A
//! file the agent rewrites after the approval (through World's tools, or by
//! a command it ran) moves the digest, and the next identical call is asked
//! again.
//!
//! The digest covers every entry's path, type, size, inode, permissions and
//! modification and change times (not its bytes: reading every file of a
//! large worktree on each call would cost more than the command). A change
//! time is set by the kernel on every write and every change of metadata and
//! no unprivileged process can set it back, so no rewrite goes unseen, even
//! one that restores a file's size and modification time. It is read by the
//! one walk a command's run takes to find every `.git` (`confine::walk`: it
//! does not enter a `.git`, follows no link, and is bounded), and the run
//! binds the `.git` that walk found: a command under a grant that asks is
//! walked once, and its run covers the worktree its approval was shown.

use crate::confine::walk::{Entry, Look, WalkError, walk};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use world_store::Ref;

/// A worktree as one walk saw it: what an approval binds, and what the run
/// it approves binds read-only.
#[derive(Debug)]
pub struct Bound {
    /// The digest of every entry.
    pub state: Ref,
    /// Every `.git` in it, for the run.
    pub git: Vec<PathBuf>,
}

/// The state of the worktree at `dir` now, and every `.git` in it, or why it
/// cannot be read whole.
pub fn worktree_state(dir: &Path) -> Result<Bound, WalkError> {
    let walked = walk(dir, Look::Whole)?;
    Ok(Bound { state: digest(&walked.entries), git: walked.git })
}

/// Each entry in path order: its path's length and bytes, then (but for a
/// `.git`, which counts by its name alone) its metadata, as little-endian
/// 64-bit numbers.
fn digest(entries: &[Entry]) -> Ref {
    let mut hash = Sha256::new();
    let mut record = Vec::with_capacity(256);
    for Entry { path, meta } in entries {
        record.clear();
        record.extend_from_slice(&(path.len() as u64).to_le_bytes());
        record.extend_from_slice(path);
        for n in meta.iter().flatten() {
            record.extend_from_slice(&n.to_le_bytes());
        }
        hash.update(&record);
    }
    Ref(hash.finalize().into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn state(root: &Path) -> Ref {
        worktree_state(root).unwrap().state
    }

    #[test]
    fn any_change_a_command_could_make_moves_the_state_and_nothing_else_does() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src/.git")).unwrap();
        std::fs::write(root.join("t.py"), "print('approved')\n").unwrap();
        let approved = state(root);
        // Reading, and asking again, change nothing.
        let _ = std::fs::read(root.join("t.py")).unwrap();
        assert_eq!(state(root), approved);

        // The same size and modification time, other bytes: the change time moves.
        let mtime = std::fs::metadata(root.join("t.py")).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(10));
        std::fs::write(root.join("t.py"), "print('rewrite')\n").unwrap();
        let f = std::fs::File::options().write(true).open(root.join("t.py")).unwrap();
        f.set_modified(mtime).unwrap();
        assert_ne!(state(root), approved, "a rewrite that restores size and mtime");

        let moved = |change: &dyn Fn()| {
            let before = state(root);
            std::thread::sleep(std::time::Duration::from_millis(10));
            change();
            assert_ne!(state(root), before);
        };
        moved(&|| std::fs::write(root.join("src/new.py"), "x").unwrap());
        moved(&|| std::fs::rename(root.join("src/new.py"), root.join("src/renamed.py")).unwrap());
        moved(&|| std::fs::set_permissions(root.join("t.py"), std::fs::Permissions::from_mode(0o700)).unwrap());
        moved(&|| std::os::unix::fs::symlink("t.py", root.join("link")).unwrap());
        moved(&|| std::fs::remove_file(root.join("src/renamed.py")).unwrap());
        // What lies inside a `.git` is the repository's, which no command may write.
        let before = state(root);
        std::fs::write(root.join("src/.git/HEAD"), "ref").unwrap();
        assert_eq!(state(root), before);
    }
}

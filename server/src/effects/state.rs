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
//! one that restores a file's size and modification time. The walk is the
//! one a command's run takes to find every `.git`: it does not enter a
//! `.git` (no command may write one), follows no link, and is bounded.

use crate::confine::policy::{GIT_WALK_DEPTH_MAX, GIT_WALK_ENTRIES_MAX};
use sha2::{Digest, Sha256};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use world_store::Ref;

/// The state of the worktree at `dir` now, or why it cannot be read whole.
pub fn worktree_state(dir: &Path) -> Result<Ref, String> {
    let mut entries = vec![];
    let mut queue = std::collections::VecDeque::from([(PathBuf::new(), 0usize)]);
    let unreadable = |rel: &Path, e: std::io::Error| format!("cannot read {}: {e}", dir.join(rel).display());
    while let Some((rel, depth)) = queue.pop_front() {
        let items = match std::fs::read_dir(dir.join(&rel)) {
            Ok(items) => items,
            // Gone since its parent was read: it holds nothing.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(unreadable(&rel, e)),
        };
        for item in items {
            let item = item.map_err(|e| unreadable(&rel, e))?;
            let path = rel.join(item.file_name());
            let Ok(meta) = item.metadata() else { continue };
            let is_git = item.file_name().to_str().is_some_and(|n| n.eq_ignore_ascii_case(".git"));
            if meta.is_dir() && !is_git {
                queue.push_back((path.clone(), depth + 1));
            }
            // A `.git` counts by its name alone: the repository's own writes move nothing.
            entries.push((path, (!is_git).then_some(meta)));
            if entries.len() > GIT_WALK_ENTRIES_MAX || depth + 1 > GIT_WALK_DEPTH_MAX {
                return Err(format!(
                    "the worktree has more than {GIT_WALK_ENTRIES_MAX} entries or {GIT_WALK_DEPTH_MAX} levels: \
                     too many to tell what a command would run over"
                ));
            }
        }
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut hash = Sha256::new();
    for (path, meta) in &entries {
        let bytes = path.as_os_str().as_bytes();
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(bytes);
        let Some(m) = meta else { continue };
        let (mtime, ctime) = ((m.mtime(), m.mtime_nsec()), (m.ctime(), m.ctime_nsec()));
        for n in [m.mode() as u64, m.size(), m.ino(), mtime.0 as u64, mtime.1 as u64, ctime.0 as u64, ctime.1 as u64] {
            hash.update(n.to_le_bytes());
        }
    }
    Ok(Ref(hash.finalize().into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn any_change_a_command_could_make_moves_the_state_and_nothing_else_does() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src/.git")).unwrap();
        std::fs::write(root.join("t.py"), "print('approved')\n").unwrap();
        let approved = worktree_state(root).unwrap();
        // Reading, and asking again, change nothing.
        let _ = std::fs::read(root.join("t.py")).unwrap();
        assert_eq!(worktree_state(root).unwrap(), approved);

        // The same size and modification time, other bytes: the change time moves.
        let mtime = std::fs::metadata(root.join("t.py")).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(10));
        std::fs::write(root.join("t.py"), "print('rewrite')\n").unwrap();
        let f = std::fs::File::options().write(true).open(root.join("t.py")).unwrap();
        f.set_modified(mtime).unwrap();
        assert_ne!(worktree_state(root).unwrap(), approved, "a rewrite that restores size and mtime");

        let moved = |change: &dyn Fn()| {
            let before = worktree_state(root).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(10));
            change();
            assert_ne!(worktree_state(root).unwrap(), before);
        };
        moved(&|| std::fs::write(root.join("src/new.py"), "x").unwrap());
        moved(&|| std::fs::rename(root.join("src/new.py"), root.join("src/renamed.py")).unwrap());
        moved(&|| std::fs::set_permissions(root.join("t.py"), std::fs::Permissions::from_mode(0o700)).unwrap());
        moved(&|| std::os::unix::fs::symlink("t.py", root.join("link")).unwrap());
        moved(&|| std::fs::remove_file(root.join("src/renamed.py")).unwrap());
        // What lies inside a `.git` is the repository's, which no command may write.
        let before = worktree_state(root).unwrap();
        std::fs::write(root.join("src/.git/HEAD"), "ref").unwrap();
        assert_eq!(worktree_state(root).unwrap(), before);
    }
}

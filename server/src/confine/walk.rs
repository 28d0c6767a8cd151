//! One bounded walk of a worktree, serving both what a command's run needs
//! and what its approval binds: every `.git` in it (each bound read-only over
//! the writable tree, see `policy::exec`) and, when asked, every entry's path
//! and metadata (what `effects::state` digests). A call walks a worktree once:
//! a command under a grant that asks is walked whole before the question, and
//! its run binds the `.git` that same walk found.
//!
//! The walk is breadth-first, follows no symbolic link, does not enter a
//! `.git` (in any case), and is bounded: past `GIT_WALK_ENTRIES_MAX` entries,
//! `GIT_WALK_DEPTH_MAX` levels or `GIT_BINDS_MAX` `.git` it is an error, and
//! so is any directory it cannot read, since no command may run over a
//! worktree it could not see whole.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Entries of a worktree looked at, at most, to find every `.git` in it
/// before a command runs; past it the command is refused rather than run
/// with a `.git` left writable.
pub const GIT_WALK_ENTRIES_MAX: usize = 200_000;
/// Directories deep that walk goes, at most (past it, the same refusal).
pub const GIT_WALK_DEPTH_MAX: usize = 64;
/// `.git` entries bound read-only for one command, at most (each is a mount;
/// past it, the same refusal).
pub const GIT_BINDS_MAX: usize = 256;

/// How much of each entry a walk reads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Look {
    /// Names and types only (the directory's own listing, no `stat`): enough
    /// to find every `.git`.
    Git,
    /// Every entry's metadata besides: what a worktree's state is made of.
    Whole,
}

/// One entry of a worktree as a whole walk saw it.
#[derive(Debug)]
pub struct Entry {
    /// Its path under the worktree, with `/` between components.
    pub path: Vec<u8>,
    /// Its mode, size, inode, modification and change times (seconds and
    /// nanoseconds); `None` for a `.git`, which counts by its name alone.
    pub meta: Option<[u64; 7]>,
}

/// What one walk found.
#[derive(Debug, Default)]
pub struct Walked {
    /// Every `.git`, directory or file, in any case and at any depth, sorted.
    pub git: Vec<PathBuf>,
    /// With `Look::Whole`: every entry, `.git` included, sorted as paths sort
    /// (component by component); empty with `Look::Git`.
    pub entries: Vec<Entry>,
}

/// Why a worktree cannot be walked whole: no command may run over it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WalkError {
    #[error("cannot look for .git in {dir}: {why}")]
    Unreadable { dir: String, why: String },
    #[error(
        "the worktree has more than {GIT_WALK_ENTRIES_MAX} entries, more than {GIT_BINDS_MAX} .git \
         or more than {GIT_WALK_DEPTH_MAX} levels of directories: too many to bind every .git in it \
         read-only, so no command runs in it"
    )]
    TooMany,
}

/// Walks the worktree at `worktree`, reading `look` of each entry.
pub fn walk(worktree: &Path, look: Look) -> Result<Walked, WalkError> {
    let unreadable =
        |dir: &Path, e: std::io::Error| WalkError::Unreadable { dir: dir.display().to_string(), why: e.to_string() };
    let mut queue = VecDeque::from([(worktree.to_path_buf(), Vec::new(), 0usize)]);
    let (mut walked, mut seen) = (Walked::default(), 0usize);
    while let Some((dir, rel, depth)) = queue.pop_front() {
        let items = match std::fs::read_dir(&dir) {
            Ok(items) => items,
            // Gone since its parent was read: it holds nothing.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(unreadable(&dir, e)),
        };
        for item in items {
            let item = item.map_err(|e| unreadable(&dir, e))?;
            seen += 1;
            if seen > GIT_WALK_ENTRIES_MAX || depth + 1 > GIT_WALK_DEPTH_MAX {
                return Err(WalkError::TooMany);
            }
            let name = item.file_name();
            let git = is_git(&name);
            let path = child(&rel, &name);
            let (kind, meta) = match look {
                Look::Git => (item.file_type().ok(), None),
                Look::Whole => match item.metadata() {
                    Ok(m) => (Some(m.file_type()), (!git).then(|| facts(&m))),
                    // Gone since the listing: not there.
                    Err(_) => continue,
                },
            };
            let Some(kind) = kind else { continue };
            if git {
                if kind.is_dir() || kind.is_file() {
                    walked.git.push(item.path());
                    if walked.git.len() > GIT_BINDS_MAX {
                        return Err(WalkError::TooMany);
                    }
                }
            } else if kind.is_dir() {
                queue.push_back((item.path(), path.clone(), depth + 1));
            }
            if look == Look::Whole {
                walked.entries.push(Entry { path, meta });
            }
        }
    }
    walked.git.sort();
    // Paths sort component by component: `/` before any byte a name holds.
    walked.entries.sort_unstable_by(|a, b| path_order(&a.path, &b.path));
    Ok(walked)
}

/// `name` is a `.git`, in any case.
fn is_git(name: &OsStr) -> bool {
    name.as_bytes().eq_ignore_ascii_case(b".git")
}

/// `rel/name`, or `name` at the top.
fn child(rel: &[u8], name: &OsStr) -> Vec<u8> {
    let name = name.as_bytes();
    let mut path = Vec::with_capacity(rel.len() + 1 + name.len());
    if !rel.is_empty() {
        path.extend_from_slice(rel);
        path.push(b'/');
    }
    path.extend_from_slice(name);
    path
}

/// What of an entry's metadata the state covers.
fn facts(m: &std::fs::Metadata) -> [u64; 7] {
    [
        m.mode() as u64,
        m.size(),
        m.ino(),
        m.mtime() as u64,
        m.mtime_nsec() as u64,
        m.ctime() as u64,
        m.ctime_nsec() as u64,
    ]
}

/// The order of `Path::cmp` over two relative paths of plain names: a
/// separator sorts before every byte a name may hold.
fn path_order(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let key = |c: &u8| if *c == b'/' { 0 } else { *c };
    a.iter().map(key).cmp(b.iter().map(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worktree_too_deep_or_with_too_many_git_cannot_be_walked_either_way() {
        let dir = tempfile::tempdir().unwrap();
        let (deep, many) = (dir.path().join("deep"), dir.path().join("many"));
        std::fs::create_dir_all((0..=GIT_WALK_DEPTH_MAX).fold(deep.clone(), |p, _| p.join("d"))).unwrap();
        for n in 0..=GIT_BINDS_MAX {
            std::fs::create_dir_all(many.join(format!("{n}/.git"))).unwrap();
        }
        for wt in [&deep, &many] {
            for look in [Look::Git, Look::Whole] {
                let why = walk(wt, look).unwrap_err().to_string();
                assert!(why.contains("too many to bind every .git in it read-only, so no command runs in it"), "{why}");
            }
        }
        std::fs::remove_dir_all(many.join("0")).unwrap();
        let shallow = (0..GIT_WALK_DEPTH_MAX).fold(deep.clone(), |p, _| p.join("d"));
        std::fs::remove_dir_all(shallow.join("d")).unwrap();
        for wt in [&deep, &many] {
            assert!(walk(wt, Look::Git).is_ok() && walk(wt, Look::Whole).is_ok(), "at the bound");
        }
    }

    #[test]
    fn a_whole_walk_finds_the_same_git_and_lists_every_entry_in_path_order() {
        let dir = tempfile::tempdir().unwrap();
        let wt = dir.path();
        for d in ["sub/.git/hooks", "a-b/c", "a/b/.GIT", "a.b", "mod", "l"] {
            std::fs::create_dir_all(wt.join(d)).unwrap();
        }
        std::fs::write(wt.join("a/x"), "x").unwrap();
        std::fs::write(wt.join("mod/.git"), "gitdir: ../sub/.git\n").unwrap();
        std::os::unix::fs::symlink("../sub/.git", wt.join("l/.git")).unwrap();
        let (git, whole) = (walk(wt, Look::Git).unwrap(), walk(wt, Look::Whole).unwrap());
        assert_eq!(git.git, whole.git);
        assert_eq!(
            whole.git,
            ["a/b/.GIT", "mod/.git", "sub/.git"].map(|p| wt.join(p)),
            "a symlink named .git is no .git"
        );
        assert!(git.entries.is_empty());
        let paths: Vec<&str> = whole.entries.iter().map(|e| std::str::from_utf8(&e.path).unwrap()).collect();
        let mut by_path = paths.clone();
        by_path.sort_by(|a, b| Path::new(a).cmp(Path::new(b)));
        assert_eq!(paths, by_path, "sorted as paths sort");
        assert!(
            paths.contains(&"sub/.git") && !paths.iter().any(|p| p.starts_with("sub/.git/")),
            "a .git is not entered"
        );
        let git_meta = whole.entries.iter().filter(|e| e.path.ends_with(b".git") || e.path.ends_with(b".GIT"));
        assert!(git_meta.clone().count() == 4 && git_meta.clone().all(|e| e.meta.is_none()), "a .git counts by name");
    }
}

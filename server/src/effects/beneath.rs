//! Paths opened beneath a worktree's directory descriptor, by the kernel.
//!
//! Every lookup is `openat2(2)` from a descriptor of the worktree (or of a
//! directory already opened beneath it) with `RESOLVE_BENEATH |
//! RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV`: a symlink may lead anywhere
//! inside by a relative target, never out (an absolute target, a `..` above
//! the worktree, a `/proc` magic link or a mount point fails with `EXDEV` or
//! `ELOOP`). What is checked is the descriptor that is then used, so nothing
//! swapped in mid-call can redirect a read or a write. Without `openat2`
//! (Linux before 5.6) every lookup fails; there is no fallback.

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, OpenHow, ResolveFlag, openat2, readlinkat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat, mkdirat};
use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// How often a lookup is retried when the kernel reports that a rename raced
/// its `..` step (`EAGAIN`); after that the call is refused.
const RACE_RETRIES: usize = 16;
/// Symlinks followed for one write target, as the kernel bounds a lookup.
const LINKS_MAX: usize = 40;
/// Directories between a write target and the worktree, at most (a path of
/// 4096 bytes has no more).
const DEPTH_MAX: usize = 2048;
/// `.git` in every case: a directory's name is compared with each.
const GIT_SPELLINGS: [&str; 8] = [".git", ".giT", ".gIt", ".gIT", ".Git", ".GiT", ".GIt", ".GIT"];

/// Why a path was not opened.
#[derive(Debug)]
pub enum Refusal {
    /// It leads out of the worktree: a symlink out or dangling, an absolute or
    /// magic link, a mount point.
    Escapes,
    /// A component does not exist (or is not a directory), as the OS said.
    Missing(std::io::Error),
    /// It is, or is inside, a directory named `.git` in any case.
    Git,
    /// This kernel has no `openat2`.
    NoOpenat2,
    /// The worktree kept changing while the path was looked up.
    Changed,
    /// Anything else, as the OS said it.
    Os(std::io::Error),
}

impl From<Errno> for Refusal {
    fn from(e: Errno) -> Refusal {
        match e {
            Errno::EXDEV | Errno::ELOOP => Refusal::Escapes,
            Errno::ENOENT | Errno::ENOTDIR => Refusal::Missing(e.into()),
            Errno::ENOSYS => Refusal::NoOpenat2,
            Errno::EAGAIN => Refusal::Changed,
            e => Refusal::Os(e.into()),
        }
    }
}

/// Where a write lands: its real directory, and a name there that was not a
/// symlink when looked at (it is opened with `O_NOFOLLOW`).
pub struct Target {
    pub dir: OwnedFd,
    pub name: Vec<u8>,
}

/// A worktree, held by a descriptor.
pub struct Beneath {
    root: OwnedFd,
    id: (u64, u64),
    path: PathBuf,
}

fn resolve() -> ResolveFlag {
    ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS | ResolveFlag::RESOLVE_NO_XDEV
}

fn id(st: &FileStat) -> (u64, u64) {
    (st.st_dev, st.st_ino)
}

fn file_type(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits())
}

/// `parts` as one relative path; `.` for none.
fn joined(parts: &[&[u8]]) -> Vec<u8> {
    if parts.is_empty() { b".".to_vec() } else { parts.join(&b'/') }
}

/// A path's last component and the path of its directory; `None` when it
/// names a directory (it ends in `..` or has no component).
fn split_last(path: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let parts: Vec<&[u8]> = path.split(|b| *b == b'/').filter(|p| !p.is_empty() && *p != b".").collect();
    let (last, dir) = parts.split_last()?;
    (*last != b"..").then(|| (joined(dir), last.to_vec()))
}

pub fn is_git(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b".git")
}

impl Beneath {
    pub fn open(root: &Path) -> Result<Beneath, Refusal> {
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = nix::fcntl::open(root, flags, Mode::empty()).map_err(|e| Refusal::Os(e.into()))?;
        let id = id(&fstat(&fd).map_err(|e| Refusal::Os(e.into()))?);
        Ok(Beneath { root: fd, id, path: root.to_path_buf() })
    }

    /// `openat2` from `dir`, retried while a rename races it.
    fn at(&self, dir: BorrowedFd, path: &[u8], flags: OFlag, resolve: ResolveFlag) -> Result<OwnedFd, Errno> {
        let mut how = OpenHow::new().flags(flags | OFlag::O_CLOEXEC).resolve(resolve);
        if flags.contains(OFlag::O_CREAT) {
            how = how.mode(Mode::from_bits_truncate(0o666));
        }
        for _ in 0..RACE_RETRIES {
            match openat2(dir, OsStr::from_bytes(path), how) {
                Err(Errno::EAGAIN) => continue,
                r => return r,
            }
        }
        Err(Errno::EAGAIN)
    }

    fn dir_at(&self, parts: &[&[u8]]) -> Result<OwnedFd, Errno> {
        self.at(self.root.as_fd(), &joined(parts), OFlag::O_PATH | OFlag::O_DIRECTORY, resolve())
    }

    /// Opens `parts` for reading (a FIFO does not block it).
    pub fn open_read(&self, parts: &[&str]) -> Result<File, Refusal> {
        let parts: Vec<&[u8]> = parts.iter().map(|p| p.as_bytes()).collect();
        let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
        Ok(File::from(self.at(self.root.as_fd(), &joined(&parts), flags, resolve())?))
    }

    /// The directory `parts` names, or an error if it is missing.
    pub fn open_dir(&self, parts: &[&str]) -> Result<OwnedFd, Refusal> {
        let parts: Vec<&[u8]> = parts.iter().map(|p| p.as_bytes()).collect();
        Ok(self.dir_at(&parts)?)
    }

    /// The directory `parts` names, made where missing: one `mkdirat` at a
    /// time, each in a directory opened beneath the worktree and checked to
    /// be outside every `.git`.
    pub fn make_dirs(&self, parts: &[&str]) -> Result<OwnedFd, Refusal> {
        let parts: Vec<&[u8]> = parts.iter().map(|p| p.as_bytes()).collect();
        let mut have = parts.len();
        let mut dir = loop {
            match self.dir_at(&parts[..have]) {
                Ok(fd) => break fd,
                Err(Errno::ENOENT) if have > 0 => have -= 1,
                Err(e) => return Err(e.into()),
            }
        };
        if have < parts.len() {
            self.outside_git(dir.as_fd())?;
        }
        for name in &parts[have..] {
            match mkdirat(&dir, OsStr::from_bytes(name), Mode::from_bits_truncate(0o777)) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(e.into()),
            }
            // Made just now, so not a symlink: one found there is refused (ELOOP).
            let flags = OFlag::O_PATH | OFlag::O_DIRECTORY;
            dir = self.at(dir.as_fd(), name, flags, resolve() | ResolveFlag::RESOLVE_NO_SYMLINKS)?;
        }
        Ok(dir)
    }

    /// Where a write of `parts` (whose directory is `dir`) lands: a last
    /// component that is a symlink is followed, its target looked up beneath
    /// the worktree again, until a name that is no symlink. Refused inside
    /// any `.git`, and through a dangling symlink.
    pub fn write_target(&self, dir: OwnedFd, parts: &[&str]) -> Result<Target, Refusal> {
        let Some((name, dir_parts)) = parts.split_last() else { return Err(Refusal::Os(Errno::EISDIR.into())) };
        let dir_parts: Vec<&[u8]> = dir_parts.iter().map(|p| p.as_bytes()).collect();
        let (mut dir, mut dir_path, mut name) = (dir, joined(&dir_parts), name.as_bytes().to_vec());
        let mut followed = false;
        for _ in 0..LINKS_MAX {
            let st = match fstatat(&dir, OsStr::from_bytes(&name), AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(Errno::ENOENT) if !followed => return self.checked(dir, name),
                Err(Errno::ENOENT) => {
                    self.checked(dir, name)?;
                    return Err(Refusal::Escapes);
                }
                Err(e) => return Err(Refusal::Os(e.into())),
            };
            if file_type(&st) != SFlag::S_IFLNK {
                return self.checked(dir, name);
            }
            let link = readlinkat(&dir, OsStr::from_bytes(&name)).map_err(|e| Refusal::Os(e.into()))?;
            if link.as_bytes().starts_with(b"/") {
                return Err(Refusal::Escapes);
            }
            // The kernel resolves `d/link` as `d/<target>`: so does this, beneath the root.
            let path = [dir_path.as_slice(), link.as_bytes()].join(&b'/');
            let (next_dir, next_name) = split_last(&path).ok_or(Refusal::Os(Errno::EISDIR.into()))?;
            let flags = OFlag::O_PATH | OFlag::O_DIRECTORY;
            dir = match self.at(self.root.as_fd(), &next_dir, flags, resolve()) {
                Ok(fd) => fd,
                Err(Errno::ENOENT | Errno::ENOTDIR) => return Err(Refusal::Escapes),
                Err(e) => return Err(e.into()),
            };
            (dir_path, name, followed) = (next_dir, next_name, true);
        }
        Err(Refusal::Escapes)
    }

    fn checked(&self, dir: OwnedFd, name: Vec<u8>) -> Result<Target, Refusal> {
        if is_git(&name) {
            return Err(Refusal::Git);
        }
        self.outside_git(dir.as_fd())?;
        Ok(Target { dir, name })
    }

    /// Opens a write target with `flags` (`O_WRONLY | O_CREAT`, `O_RDWR`),
    /// never through a symlink (one swapped in since is refused).
    pub fn open_target(&self, t: &Target, flags: OFlag) -> Result<File, Refusal> {
        let flags = flags | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
        let fd = self.at(t.dir.as_fd(), &t.name, flags, resolve() | ResolveFlag::RESOLVE_NO_SYMLINKS);
        Ok(File::from(fd.map_err(|e| if e == Errno::ENOENT { Refusal::Os(e.into()) } else { e.into() })?))
    }

    /// Walks `..` from `dir` up to the worktree: refused if a directory on the
    /// way is named `.git` (any case) in its parent, or if the walk never
    /// meets the worktree (the directory has been moved out of it).
    fn outside_git(&self, dir: BorrowedFd) -> Result<(), Refusal> {
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let os = |e: Errno| Refusal::Os(e.into());
        let mut cur = dir.try_clone_to_owned().map_err(Refusal::Os)?;
        for _ in 0..DEPTH_MAX {
            let here = id(&fstat(&cur).map_err(os)?);
            if here == self.id {
                return Ok(());
            }
            let parent = nix::fcntl::openat(&cur, "..", flags, Mode::empty()).map_err(os)?;
            if id(&fstat(&parent).map_err(os)?) == here {
                return Err(Refusal::Escapes);
            }
            let nofollow = AtFlags::AT_SYMLINK_NOFOLLOW;
            if GIT_SPELLINGS.iter().any(|g| fstatat(&parent, *g, nofollow).is_ok_and(|st| id(&st) == here)) {
                return Err(Refusal::Git);
            }
            cur = parent;
        }
        Err(Refusal::Escapes)
    }

    /// Where `fd` is now, relative to the worktree, as the kernel names it;
    /// for display only, never opened again.
    pub fn name_of(&self, fd: BorrowedFd) -> Option<PathBuf> {
        let now = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
        now.strip_prefix(&self.path).ok().map(Path::to_path_buf)
    }

    /// Opens `name` in `dir` (a directory met while walking) for reading or
    /// listing, never through a symlink or a mount point.
    pub fn open_entry(&self, dir: BorrowedFd, name: &[u8], flags: OFlag) -> Result<File, Refusal> {
        let flags = flags | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
        Ok(File::from(self.at(dir, name, flags, resolve() | ResolveFlag::RESOLVE_NO_SYMLINKS)?))
    }
}

/// An entry of a directory read by descriptor, as `fstatat` saw it (the entry
/// itself, never what a symlink points at).
pub struct Entry {
    pub name: Vec<u8>,
    pub stat: FileStat,
}

impl Entry {
    pub fn is_symlink(&self) -> bool {
        file_type(&self.stat) == SFlag::S_IFLNK
    }

    pub fn is_dir(&self) -> bool {
        file_type(&self.stat) == SFlag::S_IFDIR
    }

    pub fn is_file(&self) -> bool {
        file_type(&self.stat) == SFlag::S_IFREG
    }
}

/// A directory opened for reading, with at most `max` of its entries
/// (`.` and `..` left out, in the order the file system gives them) and
/// whether it had more.
pub fn entries(dir: File, max: usize) -> Result<(OwnedFd, Vec<Entry>, bool), Refusal> {
    let fd = OwnedFd::from(dir);
    let keep = fd.try_clone().map_err(Refusal::Os)?;
    let mut d = nix::dir::Dir::from_fd(fd)?;
    let mut names = vec![];
    let mut more = false;
    for item in d.iter().flatten() {
        let name = item.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        if names.len() >= max {
            more = true;
            break;
        }
        names.push(name.to_vec());
    }
    let nofollow = AtFlags::AT_SYMLINK_NOFOLLOW;
    let found = names
        .into_iter()
        .filter_map(|name| fstatat(&keep, OsStr::from_bytes(&name), nofollow).ok().map(|stat| Entry { name, stat }))
        .collect();
    Ok((keep, found, more))
}

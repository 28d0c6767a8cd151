//! How `--exec-allow NAME[=PATH]` becomes a program a confined run can start.
//!
//! A confined command sees the system directories, the `--confine-read`
//! trees and its program file, nothing else of the host. A program found on
//! the operator's `PATH` may live elsewhere (a version manager's shim under
//! the home directory): bound alone into the run it cannot reach what it
//! starts, and every call would fail with a message the agent cannot act on.
//! So every allowed command is resolved once, at start: its `#!` line is
//! followed, and a short name whose first match a run cannot start is
//! replaced by a later match it can (said on stderr), or the daemon refuses
//! to start, naming the command, where it resolved, why, and the fixes.

use super::policy::{RUN_PATH, SYSTEM_DIRS};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// How many `#!` interpreters deep a program's start is followed.
pub const SHEBANG_DEPTH_MAX: usize = 4;
/// How much of a program is read to find its `#!` line.
const SHEBANG_BYTES_MAX: usize = 256;
/// The longest name an allowed command may have.
const COMMAND_NAME_MAX: usize = 32;
/// How many `PATH` entries are searched for a short name.
const PATH_ENTRIES_MAX: usize = 256;

/// The host trees a confined run can read.
#[derive(Clone, Debug)]
pub struct Visible {
    trees: Vec<PathBuf>,
    /// `--unconfined`: runs see the whole host.
    everything: bool,
}

impl Visible {
    pub fn of(options: &super::Options) -> Visible {
        let system = SYSTEM_DIRS.iter().filter_map(|d| std::fs::canonicalize(d).ok());
        let extra = options.widening.read_only.iter().filter_map(|d| std::fs::canonicalize(d).ok());
        Visible { trees: system.chain(extra).collect(), everything: options.unconfined }
    }

    #[cfg(test)]
    pub fn trees(trees: &[&Path]) -> Visible {
        Visible { trees: trees.iter().map(|t| t.to_path_buf()).collect(), everything: false }
    }

    fn sees(&self, path: &Path) -> bool {
        self.everything || self.trees.iter().any(|t| path.starts_with(t))
    }
}

/// An allowed command: its name, the program a run starts, and what the
/// operator should be told about the choice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allowed {
    pub name: String,
    pub program: PathBuf,
    pub note: Option<String>,
}

/// Resolves one `--exec-allow` item against `search` (the operator's `PATH`).
pub fn resolve(item: &str, search: Option<&OsStr>, visible: &Visible) -> Result<Allowed, String> {
    let (name, explicit) = match item.split_once('=') {
        Some((n, p)) => (n, Some(PathBuf::from(p))),
        None => (item, None),
    };
    if !is_command_name(name) {
        return Err(format!("--exec-allow {item}: the name must match ^[a-z][a-z0-9-]{{0,31}}$"));
    }
    let name = name.to_string();
    match explicit {
        Some(path) => {
            let program = std::fs::canonicalize(&path).map_err(|e| format!("--exec-allow {item}: {e}"))?;
            match startable(&program, visible, 0) {
                Ok(note) => Ok(Allowed { name, program, note: note.map(|n| format!("--exec-allow {item}: {n}")) }),
                Err(why) => Err(refusal(item, &name, &program, &why, visible)),
            }
        }
        None => by_name(name, search, visible),
    }
}

/// A short name: the first match on `PATH` a confined run can start, else a
/// match in the run's own `PATH`; an outside program with nothing beside it
/// to start (no `#!`) is taken as a last resort, bound alone.
fn by_name(name: String, search: Option<&OsStr>, visible: &Visible) -> Result<Allowed, String> {
    let found = candidates(&name, search);
    let Some(first) = found.first().cloned() else {
        return Err(format!("--exec-allow {name}: not found on PATH"));
    };
    let (mut why_first, mut first_alone) = (None, None);
    for program in &found {
        match startable(program, visible, 0) {
            Ok(None) => {
                let note = (*program != first).then(|| {
                    format!(
                        "--exec-allow {name}: using {} ({} is first on PATH, but {}; name it to silence this: --exec-allow {name}={})",
                        program.display(),
                        first.display(),
                        why_first.as_deref().unwrap_or("a confined run cannot start it"),
                        program.display()
                    )
                });
                return Ok(Allowed { name, program: program.clone(), note });
            }
            // A script outside starts its own tree's programs: only a binary may run bound alone.
            Ok(Some(why)) if *program == first && !is_script(program) => {
                first_alone = Some(why.clone());
                why_first.get_or_insert(why);
            }
            Ok(Some(why)) | Err(why) => {
                why_first.get_or_insert(why);
            }
        }
    }
    if let Some(note) = first_alone {
        return Ok(Allowed { name: name.clone(), program: first, note: Some(format!("--exec-allow {name}: {note}")) });
    }
    let why = why_first.unwrap_or_else(|| outside(visible));
    Err(refusal(&name, &name, &first, &why, visible))
}

/// Every executable file named `name` on `search`, then on the run's own
/// `PATH`, canonical and without repeats, in that order.
fn candidates(name: &str, search: Option<&OsStr>) -> Vec<PathBuf> {
    let operator = search.map(|s| std::env::split_paths(s).collect::<Vec<_>>()).unwrap_or_default();
    let on_operator_path = operator.into_iter().take(PATH_ENTRIES_MAX).map(|d| d.join(name));
    let mut out: Vec<PathBuf> = vec![];
    for real in executables(on_operator_path).chain(on_run_path(name)) {
        if !out.contains(&real) {
            out.push(real);
        }
    }
    out
}

/// Executable files named `name` in a confined run's own `PATH`, canonical.
fn on_run_path(name: &str) -> impl Iterator<Item = PathBuf> {
    executables(std::env::split_paths(OsStr::new(RUN_PATH)).map(|d| d.join(name)).collect::<Vec<_>>().into_iter())
}

/// The paths among `paths` that are executable files, canonical.
fn executables(paths: impl Iterator<Item = PathBuf>) -> impl Iterator<Item = PathBuf> {
    paths.filter(|p| is_executable(p)).filter_map(|p| std::fs::canonicalize(p).ok())
}

/// Whether a run can start `program`: `Ok(None)` if all it needs is
/// visible, `Ok(Some(note))` if it starts but only its own file is bound,
/// `Err(why)` if it cannot start.
fn startable(program: &Path, visible: &Visible, depth: usize) -> Result<Option<String>, String> {
    if depth > SHEBANG_DEPTH_MAX {
        return Err(format!("its #! interpreters nest more than {SHEBANG_DEPTH_MAX} deep"));
    }
    if !is_executable(program) {
        return Err(format!("{} is not an executable file", program.display()));
    }
    let seen = visible.sees(program);
    let Some((interpreter, arg)) = shebang(program) else {
        if !is_elf(program) {
            return Err(format!(
                "{} is neither an ELF program nor a #! script: the kernel cannot start it",
                program.display()
            ));
        }
        return Ok((!seen).then(|| format!("{}: only this file is bound into a run", outside(visible))));
    };
    let real = std::fs::canonicalize(&interpreter)
        .map_err(|e| format!("its interpreter {} (#!): {e}", interpreter.display()))?;
    if !visible.sees(&real) {
        return Err(format!(
            "its interpreter {} (#!) is outside the directories a confined command can read",
            real.display()
        ));
    }
    startable(&real, visible, depth + 1).map_err(|e| format!("its interpreter {}: {e}", real.display()))?;
    if real.file_name() == Some(OsStr::new("env"))
        && let Some(target) = arg.as_deref().filter(|a| !a.starts_with('-'))
    {
        let Some(next) = on_run_path(target).next().filter(|c| visible.sees(c)) else {
            return Err(format!("its #!{} finds no {target} on a confined run's PATH ({RUN_PATH})", real.display()));
        };
        startable(&next, visible, depth + 1).map_err(|e| format!("{}: {e}", next.display()))?;
    }
    // Its interpreter starts; what the script itself starts from beside it
    // does not exist in a run.
    Ok((!seen).then(|| {
        format!(
            "it is a script ({}) outside the directories a confined command can read: a run would see that one file, not what it starts from beside it",
            shebang_text(&interpreter, arg.as_deref())
        )
    }))
}

/// The `#!` line of `program`: the interpreter and its one optional argument.
fn shebang(program: &Path) -> Option<(PathBuf, Option<String>)> {
    use std::io::Read;
    let mut head = Vec::with_capacity(SHEBANG_BYTES_MAX);
    std::fs::File::open(program).ok()?.take(SHEBANG_BYTES_MAX as u64).read_to_end(&mut head).ok()?;
    let line = head.strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let line = std::str::from_utf8(line).ok()?.trim();
    let (interpreter, arg) = match line.split_once(char::is_whitespace) {
        Some((i, a)) => (i, Some(a.trim().to_string()).filter(|a| !a.is_empty())),
        None => (line, None),
    };
    (!interpreter.is_empty()).then(|| (PathBuf::from(interpreter), arg))
}

fn shebang_text(interpreter: &Path, arg: Option<&str>) -> String {
    match arg {
        Some(a) => format!("#!{} {a}", interpreter.display()),
        None => format!("#!{}", interpreter.display()),
    }
}

fn is_elf(program: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(program).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && magic == *b"\x7fELF"
}

fn is_script(program: &Path) -> bool {
    shebang(program).is_some()
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn is_command_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= COMMAND_NAME_MAX
        && name.as_bytes()[0].is_ascii_lowercase()
        && name.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
}

fn outside(visible: &Visible) -> String {
    let trees: Vec<String> = visible.trees.iter().map(|t| t.display().to_string()).collect();
    format!("it lies outside the directories a confined command can read ({})", trees.join(", "))
}

/// The refusal to start: the command, where it resolved, why, and the fixes.
fn refusal(item: &str, name: &str, program: &Path, why: &str, visible: &Visible) -> String {
    // A program a run can start as it is (`Ok(None)`: visible, and all it needs too).
    let equivalent = on_run_path(name).find(|c| startable(c, visible, 0) == Ok(None));
    let named = match equivalent {
        Some(p) => format!("--exec-allow {name}={}", p.display()),
        None => format!("--exec-allow {name}=PATH with a program under {}", SYSTEM_DIRS.join(", ")),
    };
    format!(
        "--exec-allow {item}: {name} resolves to {}, which a confined command cannot start: {why}. Name a program a run can see ({named}), or let runs read its tree: --confine-read {}",
        program.display(),
        tree_of(program).display()
    )
}

/// The tree a program belongs to: above its `bin`-like directory.
fn tree_of(program: &Path) -> PathBuf {
    let dir = program.parent().unwrap_or(Path::new("/"));
    let bin_like = dir.file_name().and_then(OsStr::to_str).is_some_and(|n| matches!(n, "bin" | "sbin" | "shims"));
    match dir.parent() {
        Some(up) if bin_like && up != Path::new("/") => up.to_path_buf(),
        _ => dir.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// `root/sys` stands for the system directories, `root/home` for a tree
    /// a run cannot read.
    struct Host {
        _dir: tempfile::TempDir,
        sys: PathBuf,
        home: PathBuf,
    }

    fn host() -> Host {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (sys, home) = (root.join("sys"), root.join("home"));
        for d in [sys.join("bin"), home.join("shims"), home.join("libexec")] {
            std::fs::create_dir_all(d).unwrap();
        }
        Host { _dir: dir, sys, home }
    }

    fn program(path: &Path, body: &str) -> PathBuf {
        std::fs::write(path, body).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.to_path_buf()
    }

    fn search(dirs: &[&Path]) -> std::ffi::OsString {
        std::env::join_paths(dirs).unwrap()
    }

    #[test]
    fn a_shim_first_on_path_gives_way_to_a_visible_program_and_says_so() {
        let h = host();
        program(&h.home.join("libexec/zz-tool"), "\x7fELF");
        program(&h.home.join("shims/zz-tool"), "#!/usr/bin/env bash\nexec ../libexec/zz-tool \"$@\"\n");
        let real = program(&h.sys.join("bin/zz-tool"), "\x7fELF");
        let path = search(&[&h.home.join("shims"), &h.sys.join("bin")]);
        let allowed = resolve("zz-tool", Some(&path), &Visible::trees(&[&h.sys, Path::new("/usr")])).unwrap();
        assert_eq!(allowed.program, real);
        let note = allowed.note.unwrap();
        assert!(note.contains("using") && note.contains("shims/zz-tool") && note.contains("is a script"), "{note}");
        assert!(note.contains(&format!("--exec-allow zz-tool={}", real.display())), "{note}");
    }

    #[test]
    fn a_shim_with_no_visible_equivalent_refuses_naming_where_why_and_both_fixes() {
        let h = host();
        let shim = program(&h.home.join("shims/zzcmd"), "#!/usr/bin/env bash\nexec ../libexec/zzcmd\n");
        let path = search(&[&h.home.join("shims")]);
        let e = resolve("zzcmd", Some(&path), &Visible::trees(&[&h.sys, Path::new("/usr")])).unwrap_err();
        assert!(e.contains(&format!("zzcmd resolves to {}", shim.display())), "{e}");
        assert!(e.contains("a script"), "{e}");
        assert!(e.contains("--exec-allow zzcmd=PATH"), "{e}");
        assert!(e.contains(&format!("--confine-read {}", h.home.display())), "{e}");
    }

    #[test]
    fn an_interpreter_a_run_cannot_read_refuses_an_explicit_script() {
        let h = host();
        let interp = program(&h.home.join("libexec/interp"), "\x7fELF");
        let script = program(&h.sys.join("bin/job"), &format!("#!{} -q\nrun\n", interp.display()));
        let e = resolve(&format!("job={}", script.display()), None, &Visible::trees(&[&h.sys])).unwrap_err();
        assert!(e.contains("its interpreter") && e.contains("outside the directories"), "{e}");
        let allowed = resolve(&format!("job={}", script.display()), None, &Visible::trees(&[&h.sys, &h.home]));
        assert_eq!(allowed.unwrap().program, script, "once its tree is readable the script starts");
    }

    #[test]
    fn an_explicit_script_outside_whose_interpreter_is_visible_runs_bound_alone_with_a_note() {
        let h = host();
        let interp = program(&h.sys.join("bin/sh"), "\x7fELF");
        let script = program(&h.home.join("libexec/job.sh"), &format!("#!{}\necho hi\n", interp.display()));
        let allowed = resolve(&format!("job={}", script.display()), None, &Visible::trees(&[&h.sys])).unwrap();
        assert_eq!(allowed.program, script);
        assert!(allowed.note.unwrap().contains("a run would see that one file"));
    }

    #[test]
    fn a_binary_outside_the_system_with_nothing_visible_instead_is_bound_alone_with_a_note() {
        let h = host();
        let tool = program(&h.home.join("libexec/solo-tool"), "\x7fELF");
        let allowed = resolve("solo-tool", Some(&search(&[&h.home.join("libexec")])), &Visible::trees(&[&h.sys]));
        let allowed = allowed.unwrap();
        assert_eq!(allowed.program, tool);
        assert!(allowed.note.unwrap().contains("only this file is bound"));
    }

    #[test]
    fn a_file_the_kernel_cannot_start_is_refused_at_start() {
        let h = host();
        let text = program(&h.sys.join("bin/notes"), "echo hi\n");
        let e = resolve(&format!("notes={}", text.display()), None, &Visible::trees(&[&h.sys])).unwrap_err();
        assert!(e.contains("neither an ELF program nor a #! script"), "{e}");
    }

    #[test]
    fn bad_names_and_missing_programs_are_refused() {
        let h = host();
        let visible = Visible::trees(&[&h.sys]);
        assert!(resolve("Py", None, &visible).unwrap_err().contains("the name must match"));
        assert!(
            resolve("nothing-here-zz", Some(&search(&[&h.sys])), &visible).unwrap_err().contains("not found on PATH")
        );
        assert!(resolve("x=/nonexistent/x", None, &visible).is_err());
    }

    #[test]
    fn the_real_python3_under_usr_starts_as_it_is() {
        let Ok(python) = std::fs::canonicalize("/usr/bin/python3") else { return };
        let visible = Visible::of(&crate::confine::Options { unconfined: false, widening: Default::default() });
        let allowed = resolve("python3=/usr/bin/python3", None, &visible).unwrap();
        assert_eq!((allowed.program, allowed.note), (python, None));
    }
}

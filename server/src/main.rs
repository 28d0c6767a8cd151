//! `worldd`: World's daemon and command line.

/// A line on standard output that never panics: a reader that went away (`worldd
/// approvals | head -1`) leaves the verb to finish its work and exit with its
/// own code, not to print a backtrace. Declared before the modules, which see it.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `say!` without the line's end.
macro_rules! say_raw {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

/// A line on standard error that never panics, for the daemon's notes and the
/// verbs' errors alike: a closed stderr costs the line, never the process.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `note!` without the line's end.
macro_rules! note_raw {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

mod admin;
mod approvals;
mod cli;
mod clock;
mod confine;
mod coordinator;
mod daemon;
mod effects;
mod episodes;
mod glances;
mod http;
mod limits;
mod metrics;
mod operator;
mod publish;
mod registry;
mod report;
mod runtime;
mod serve;
mod sessions;
mod stores;
mod tools;
mod writes;

/// The writer and the HTTP path allocate and free many small buffers per call
/// (B-tree pages, rows, JSON values); glibc's allocator spent a fifth of the
/// writer thread's time on them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // The confinement helper runs for every confined process: it skips the
    // command-line parser and starts nothing but itself.
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() == Some(std::ffi::OsStr::new(confine::HELPER_COMMAND)) {
        let invocation = args.next().and_then(|a| a.into_string().ok()).unwrap_or_default();
        return confine::helper::main(&invocation);
    }
    cli::run()
}

#[cfg(test)]
#[path = "../../tests/common/layering.rs"]
mod layering;

#[cfg(test)]
mod layers {
    use crate::layering::Graph;
    use std::path::Path;

    /// The daemon's layers, bottom to top: a module imports only from its own
    /// layer or below (its longest listed entry places it); the crate root,
    /// above every layer, only declares the modules and `main`.
    const LAYERS: &[&[&str]] = &[
        &["registry::descriptor", "limits", "clock", "metrics"],
        &["sessions", "operator", "stores", "report", "writes", "glances", "approvals"],
        &["confine"],
        &["runtime"],
        &["registry"],
        &["effects", "publish"],
        &["coordinator"],
        &["tools", "episodes"],
        &["daemon"],
        &["admin", "http", "approvals::sweep"],
        &["serve"],
        &["cli"],
    ];

    #[test]
    fn every_import_in_the_daemon_points_down() {
        let graph = Graph::of(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
        let circles: Vec<String> = graph.circles().iter().map(|c| graph.spell(c)).collect();
        let up = graph.upward(LAYERS);
        assert!(
            circles.is_empty() && up.is_empty(),
            "import circles in server/src:\n{}\nimports pointing up in server/src:\n{}",
            circles.join("\n"),
            up.join("\n")
        );
        // The coordinator runs against a Host: neither the daemon nor HTTP, in
        // any of its phases.
        let coordinator = graph.edges.iter().filter(|(m, _)| *m == "coordinator" || m.starts_with("coordinator::"));
        let mut phases = 0;
        for (module, uses) in coordinator {
            assert!(
                !uses.keys().any(|m| m == "daemon" || m == "http" || m.starts_with("http::")),
                "{module}: {uses:?}"
            );
            phases += 1;
        }
        assert!(phases > 1, "the coordinator's phases are modules of their own");
    }
}

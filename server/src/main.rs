//! `worldd`: World's daemon and command line.

mod admin;
mod cli;
mod clock;
mod confine;
mod coordinator;
mod daemon;
mod effects;
mod http;
mod limits;
mod publish;
mod registry;
mod report;
mod runtime;
mod serve;
mod sessions;
mod stores;
mod tools;
mod writes;

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
    /// The daemon's layers, top to bottom: a module imports only from its own
    /// layer or below (a module's longest listed prefix places it).
    const LAYERS: &[&[&str]] = &[
        &["crate"],
        &["cli"],
        &["serve"],
        &["admin", "http"],
        &["daemon"],
        &["tools"],
        &["coordinator"],
        &["effects", "runtime", "publish", "confine"],
        &["registry"],
        &["runtime::builtin", "sessions", "stores", "report", "writes"],
        &["registry::descriptor", "limits", "clock"],
    ];

    #[test]
    fn every_import_in_the_daemon_points_down() {
        let imports = crate::layering::Imports::of(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
        assert_eq!(imports.circle(), None, "an import circle");
        assert_eq!(imports.upward(LAYERS), Vec::<String>::new());
        // The coordinator runs against a Host: neither the daemon nor HTTP.
        let coordinator = &imports.edges["coordinator"];
        assert!(!coordinator.iter().any(|m| m == "daemon" || m.starts_with("http")), "{coordinator:?}");
    }
}

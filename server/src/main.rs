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
mod runtime;
mod sessions;
mod stores;
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

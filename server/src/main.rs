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

fn main() -> std::process::ExitCode {
    cli::run()
}

//! `worldd`: World's daemon and command line.

mod admin;
mod cli;
mod clock;
mod daemon;
mod http;
mod limits;
mod sessions;

fn main() -> std::process::ExitCode {
    cli::run()
}

//! The `worldd` command line. Errors are one line on stderr; exit codes:
//! 0 success, 1 a usage, client or verification failure, 2 a fatal startup or
//! open failure (see README).

mod approvals;
mod client;
mod compact;
mod episodes;
pub(crate) mod export;
pub(crate) mod locate;
mod publish;
mod quickstart;
mod session;
mod tasks;
pub(crate) mod verify;
mod why;

use crate::approvals::Verdict;
use crate::limits::{
    CACHE_MIB_DEFAULT, CACHE_MIB_MAX, CACHE_MIB_MIN, CONNECTIONS_MAX, DEFAULT_BIND, HOST_CALLBACKS_DEFAULT,
    SESSION_TTL_DEFAULT_S,
};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "worldd",
    version,
    about = "World: a durable, content-addressed world store served to agents over MCP and A2A"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the store over HTTP (REST, MCP, A2A) on a loopback address.
    Serve {
        /// The store file; created if absent (its directory must exist).
        #[arg(long, required_unless_present = "store", conflicts_with = "store")]
        db: Option<PathBuf>,
        /// A PostgreSQL store shared with other nodes: postgres://USER[:PASSWORD]@HOST:PORT/DATABASE
        /// (its schema made by `worldd store init`). Needs --dir.
        #[arg(long, requires = "dir")]
        store: Option<String>,
        /// With --store: this node's own directory (admin socket, scratch space).
        #[arg(long, requires = "store")]
        dir: Option<PathBuf>,
        /// Loopback host:port to listen on.
        #[arg(long, default_value = DEFAULT_BIND)]
        bind: String,
        /// Episode worktrees live at <DIR>/<episode>.
        #[arg(long)]
        workspace_root: Option<PathBuf>,
        /// A command `workspace-exec` may run: NAME (found on PATH) or NAME=PATH. Repeatable.
        #[arg(long = "exec-allow")]
        exec_allow: Vec<String>,
        /// MCP host callbacks that may run at once; the next is refused with "capacity exceeded".
        #[arg(long, default_value_t = HOST_CALLBACKS_DEFAULT)]
        host_callbacks: usize,
        /// The store's page cache, in MiB: what the daemon keeps of the store in memory.
        #[arg(long, default_value_t = CACHE_MIB_DEFAULT,
              value_parser = clap::value_parser!(u64).range(CACHE_MIB_MIN..=CACHE_MIB_MAX))]
        cache_mib: u64,
        /// Count nothing and serve no /metrics: the benchmarks' baseline for what the metrics cost.
        #[arg(long, hide = true)]
        no_metrics: bool,
        /// Open connections at most: a smaller cap, for tests of what happens at it.
        #[arg(long, hide = true, default_value_t = CONNECTIONS_MAX as u64,
              value_parser = clap::value_parser!(u64).range(1..=CONNECTIONS_MAX as u64))]
        connections_max: u64,
        /// Seconds an approval waits for a person, and an approved effect for its run.
        #[arg(long = "approval-ttl", default_value_t = crate::approvals::APPROVAL_TTL_DEFAULT_S,
              value_parser = clap::value_parser!(u64).range(1..=crate::approvals::APPROVAL_TTL_MAX_S))]
        approval_ttl: u64,
        /// Threads serving connections and running their calls up to the store, each with the
        /// connections it was given [default: the number of cores].
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=crate::limits::WORKERS_MAX))]
        workers: Option<u64>,
        #[command(flatten)]
        reads: ReadsArgs,
        #[command(flatten)]
        confine: ConfineArgs,
    },
    /// Create a store, a genesis world, the builtin tools, a demo worktree and session, then serve.
    Quickstart {
        #[arg(long, default_value = "./world-quickstart")]
        dir: PathBuf,
        /// Serve a PostgreSQL store shared with other nodes instead of a file in --dir:
        /// postgres://USER[:PASSWORD]@HOST:PORT/DATABASE. What the database lacks is created.
        #[arg(long)]
        store: Option<String>,
        #[arg(long, default_value = DEFAULT_BIND)]
        bind: String,
        /// A command the agent may run in its worktree through `workspace-exec`: NAME (found on
        /// PATH) or NAME=PATH, e.g. python3=/usr/bin/python3. Repeatable; confined (see README).
        #[arg(long = "exec-allow")]
        exec_allow: Vec<String>,
        /// EFFECT[=SCOPE]: the demo session's effects under the named grants wait for a
        /// person's approval (see README: Approvals). Repeatable.
        #[arg(long = "ask")]
        ask: Vec<String>,
        /// EFFECT[=SCOPE]: like --ask, but only the operator's approval counts. Repeatable.
        #[arg(long = "ask-operator")]
        ask_operator: Vec<String>,
        #[command(flatten)]
        reads: ReadsArgs,
        #[command(flatten)]
        confine: ConfineArgs,
    },
    /// Publish transitions into the registry (live through a running daemon, or offline).
    Publish {
        #[command(flatten)]
        at: StoreArgs,
        /// A JSON array of transition descriptors.
        #[arg(long, conflicts_with = "builtin", required_unless_present = "builtin")]
        manifest: Option<PathBuf>,
        /// The shipped package: tools.echo and the coding tools.
        #[arg(long)]
        builtin: bool,
        /// Allow a new revision of an id already published with different bytes.
        #[arg(long)]
        replace: bool,
    },
    /// Mint, list and revoke session credentials.
    #[command(subcommand)]
    Session(SessionCommand),
    /// List the approvals that wait for a person (or were approved and not yet used).
    Approvals {
        #[command(flatten)]
        at: StoreArgs,
        #[arg(long)]
        json: bool,
    },
    /// Approve a pending approval: the agent's next identical call runs the effect once.
    Approve {
        #[command(flatten)]
        at: StoreArgs,
        /// The approval id (ap-…), as `worldd approvals` and the agent's tool result name it.
        id: String,
        /// Approve this exact request (the same tool, the same arguments) for the rest of the session.
        #[arg(long)]
        for_session: bool,
    },
    /// Deny a pending approval: nothing runs, nothing is debited, the denial is recorded.
    Deny {
        #[command(flatten)]
        at: StoreArgs,
        id: String,
        /// Why, kept in the approval's record.
        #[arg(long, default_value = "")]
        note: String,
    },
    /// Stop a running task's command (its whole process tree); the task reads cancelled, its debit stays.
    Cancel {
        #[command(flatten)]
        at: StoreArgs,
        /// The task's invocation id (mcp:EPISODE:ID or a2a:EPISODE:ID), as `worldd episodes` names it.
        invocation_id: String,
    },
    /// Manage a PostgreSQL store.
    #[command(subcommand)]
    Store(StoreCommand),
    /// Verify a store offline: payload hashes, the log's hash chain, worlds, journal, ledger.
    Verify {
        #[command(flatten)]
        at: StoreArgs,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Also run the storage engine's own integrity check on a copy of the file.
        #[arg(long)]
        deep: bool,
    },
    /// Give the store's free pages back to the file system (offline: stop the daemon first).
    Compact {
        /// The store file [default: $WORLD_DB, else ./world-quickstart/world.db].
        #[arg(long)]
        db: Option<PathBuf>,
    },
    /// Write the store (one consistent snapshot; beside a live daemon too) as a portable stream.
    Export {
        #[command(flatten)]
        at: StoreArgs,
        #[arg(long)]
        out: PathBuf,
        /// Include session credentials (their hashes, never tokens).
        #[arg(long)]
        with_sessions: bool,
    },
    /// Rebuild a new store from an export stream; nothing is left behind if it does not check out.
    Import {
        #[command(flatten)]
        at: StoreArgs,
        #[arg(long = "in")]
        input: PathBuf,
    },
    /// Print a page of log entries from a running daemon.
    Log {
        #[arg(long, default_value_t = 0)]
        from: u64,
        #[arg(long)]
        limit: Option<u64>,
        #[command(flatten)]
        daemon: DaemonArgs,
    },
    /// Print one object's metadata (and payload) from a running daemon.
    Object {
        /// sha256:<hex>
        reference: String,
        /// Include the payload (base64).
        #[arg(long)]
        payload: bool,
        #[command(flatten)]
        daemon: DaemonArgs,
    },
    /// Walk from an object, entry hash, world, entry index or `head` to the log
    /// entry and world that carry it, recomputing every hash (exit 0 verified, 1 a link failed, 2 not
    /// found, 3 the daemon cannot be reached).
    Why {
        target: String,
        #[command(flatten)]
        daemon: DaemonArgs,
        #[arg(long)]
        json: bool,
    },
    /// Print the selected head of a running daemon.
    Head {
        #[command(flatten)]
        daemon: DaemonArgs,
    },
    /// List a running daemon's episodes, most recently active first: calls, their states,
    /// effects, last activity and spend per grant.
    Episodes {
        #[command(flatten)]
        daemon: DaemonArgs,
        /// Print the body of GET /v1/episodes as it came.
        #[arg(long)]
        json: bool,
        /// Most episodes shown.
        #[arg(long, default_value_t = 50,
              value_parser = clap::value_parser!(u64).range(1..=episodes::EPISODES_LIMIT_MAX))]
        limit: u64,
    },
    /// Show what one episode did and paid (its summary), then its last calls.
    Episode {
        episode: String,
        #[command(flatten)]
        daemon: DaemonArgs,
        /// Print the bodies of GET /v1/episodes/EP and of its last calls' page, one per line.
        #[arg(long)]
        json: bool,
        /// How many of the latest calls to show (0: none).
        #[arg(long, default_value_t = 10,
              value_parser = clap::value_parser!(u64).range(0..=episodes::CALLS_MAX))]
        calls: u64,
    },
}

/// How `serve` confines and bounds what it runs for agents.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ConfineArgs {
    /// Run transitions and exec commands WITHOUT kernel confinement (they can
    /// reach everything the daemon's user can). Logged at start, shown by
    /// /v1/health and in every worktree policy digest.
    #[arg(long)]
    pub unconfined: bool,
    /// Let `workspace-exec` commands use the network (TCP/UDP, DNS); recorded in the policy digest.
    #[arg(long)]
    pub exec_network: bool,
    /// An extra host directory that confined runs may read (e.g. a toolchain outside /usr). Repeatable.
    #[arg(long = "confine-read", value_name = "DIR")]
    pub confine_read: Vec<PathBuf>,
    /// The memory of one `workspace-exec` command, all its processes and its /tmp together
    /// (default 2048); past it the kernel kills the command (as root: a memory cgroup per run).
    #[arg(long = "exec-memory-mib", value_name = "MIB", value_parser = clap::value_parser!(u64).range(RUN_MEMORY_MIB_MIN..=RUN_MEMORY_MIB_MAX))]
    pub exec_memory_mib: Option<u64>,
    /// The memory of one pure transition phase as a whole (default 512).
    #[arg(long = "pure-memory-mib", value_name = "MIB", value_parser = clap::value_parser!(u64).range(RUN_MEMORY_MIB_MIN..=RUN_MEMORY_MIB_MAX))]
    pub pure_memory_mib: Option<u64>,
    /// What one episode's worktree may hold (default 4096): past it commands stop and the
    /// file tools refuse to grow it.
    #[arg(long = "worktree-quota-mib", value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=WORKTREE_QUOTA_MIB_MAX))]
    pub worktree_quota_mib: Option<u64>,
    /// Seconds a `workspace-exec` command run as a task may take (default 600,
    /// at most 14400). A command answered in its own request stops at 9 s.
    #[arg(long = "exec-timeout", value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=crate::coordinator::tasks::EXEC_TIMEOUT_MAX.as_secs()))]
    pub exec_timeout: Option<u64>,
    /// Commands running as tasks on this daemon at once (default 16); past it
    /// a call that would start one is refused, nothing debited.
    #[arg(long = "tasks-max", value_name = "N", value_parser = clap::value_parser!(u64).range(1..=TASKS_MAX_MAX))]
    pub tasks_max: Option<u64>,
}

/// The most `--tasks-max` takes.
const TASKS_MAX_MAX: u64 = 1024;

/// The largest worktree quota, in MiB (16 TiB).
const WORKTREE_QUOTA_MIB_MAX: u64 = 16 << 20;

/// The smallest and largest memory bound a run may be given, in MiB.
const RUN_MEMORY_MIB_MIN: u64 = 64;
const RUN_MEMORY_MIB_MAX: u64 = 1 << 20;

impl ConfineArgs {
    pub fn task_limits(&self) -> crate::coordinator::tasks::TaskLimits {
        let defaults = crate::coordinator::tasks::TaskLimits::default();
        crate::coordinator::tasks::TaskLimits {
            exec_timeout: self.exec_timeout.map_or(defaults.exec_timeout, std::time::Duration::from_secs),
            running_max: self.tasks_max.map_or(defaults.running_max, |n| n as usize),
        }
    }

    pub fn worktree_quota_bytes(&self) -> u64 {
        self.worktree_quota_mib.map_or(crate::effects::quota::WORKTREE_QUOTA_BYTES, |m| m << 20)
    }

    pub fn options(&self) -> crate::confine::Options {
        crate::confine::Options {
            unconfined: self.unconfined,
            widening: crate::confine::policy::Widening {
                read_only: self.confine_read.clone(),
                exec_network: self.exec_network,
                exec_memory: self.exec_memory_mib.map(|m| m << 20),
                pure_memory: self.pure_memory_mib.map(|m| m << 20),
            },
        }
    }
}

/// `serve --private-reads`.
#[derive(clap::Args, Clone, Copy, Debug, Default)]
pub struct ReadsArgs {
    /// Reads (the /v1 GET routes but /v1/health, /metrics, the workbench) need a credential:
    /// a session reads its own episode; the operator token, written at start to
    /// <store>.operator-token (mode 0600), reads everything.
    #[arg(long)]
    pub private_reads: bool,
}

/// Which running daemon a client verb reads from, and with what credential.
#[derive(clap::Args, Clone, Debug)]
pub struct DaemonArgs {
    /// The daemon's address, http://HOST:PORT [default: $WORLD_ADDR, else the address the
    /// daemon of --db (or of ./world-quickstart) recorded beside its store, else http://127.0.0.1:7644].
    #[arg(long, value_name = "URL")]
    pub addr: Option<String>,
    /// Read with the credential in FILE: a session's token, or the operator's
    /// (for a daemon started with --private-reads).
    #[arg(long, value_name = "FILE", conflicts_with = "db")]
    pub token_file: Option<PathBuf>,
    /// The daemon's store file: read with the operator token it wrote beside it
    /// (<PATH>.operator-token), when it wrote one [default: $WORLD_DB, else ./world-quickstart/world.db].
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
}

/// Which store a verb works on: one file, or a PostgreSQL database. Neither
/// given: `WORLD_DB` or `WORLD_STORE`, else quickstart's store in
/// `./world-quickstart` (`locate::store`).
#[derive(clap::Args, Clone, Debug)]
pub struct StoreArgs {
    /// The store file [default: $WORLD_DB, else ./world-quickstart/world.db].
    #[arg(long, conflicts_with = "store")]
    db: Option<PathBuf>,
    /// A PostgreSQL store: postgres://USER[:PASSWORD]@HOST:PORT/DATABASE [default: $WORLD_STORE].
    #[arg(long)]
    store: Option<String>,
}

impl StoreArgs {
    fn spec(&self) -> Result<crate::stores::StoreSpec, ExitCode> {
        locate::store(self.db.clone(), self.store.clone()).map_err(|e| fail(1, e))
    }
}

#[derive(Subcommand)]
enum StoreCommand {
    /// Create or upgrade World's schema in a PostgreSQL database (idempotent;
    /// refused if the database's schema is newer than this binary).
    Init {
        /// postgres://USER[:PASSWORD]@HOST:PORT/DATABASE
        #[arg(long)]
        store: String,
    },
}

#[derive(Subcommand)]
enum SessionCommand {
    /// Mint a session credential; the token is shown once.
    Mint {
        #[command(flatten)]
        at: StoreArgs,
        #[arg(long)]
        episode: String,
        /// EFFECT=SCOPE:BUDGET (repeatable).
        #[arg(long = "grant", required = true)]
        grants: Vec<String>,
        /// EFFECT[=SCOPE]: each effect under the matching grants waits for a person's
        /// approval (the agent's client may ask its user, or the operator decides). Repeatable.
        #[arg(long = "ask")]
        ask: Vec<String>,
        /// EFFECT[=SCOPE]: like --ask, but only the operator's approval counts. Repeatable.
        #[arg(long = "ask-operator")]
        ask_operator: Vec<String>,
        /// Lifetime in seconds.
        #[arg(long, default_value_t = SESSION_TTL_DEFAULT_S)]
        ttl: u64,
        /// Write the token to FILE (mode 0600) instead of stdout.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Skip the confirmation asked on the controlling terminal.
        #[arg(long)]
        yes: bool,
    },
    /// List session credentials (never tokens).
    List {
        #[command(flatten)]
        at: StoreArgs,
        #[arg(long)]
        json: bool,
    },
    /// Revoke a credential: the next request with its token is SessionUnknown.
    Revoke {
        #[command(flatten)]
        at: StoreArgs,
        credential_id: String,
    },
}

/// Prints `worldd: <message>` and returns the exit code.
pub fn fail(code: u8, message: impl std::fmt::Display) -> ExitCode {
    note!("worldd: {message}");
    ExitCode::from(code)
}

pub fn run() -> ExitCode {
    // Usage errors exit 1 as documented (clap's own default is 2, the startup-failure code).
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 1 } else { 0 });
        }
    };
    match cli.command {
        Command::Serve {
            db,
            store,
            dir,
            bind,
            workspace_root,
            exec_allow,
            host_callbacks,
            cache_mib,
            no_metrics,
            connections_max,
            approval_ttl,
            workers,
            reads,
            confine,
        } => {
            let print_connections = true;
            let local = match (&db, &dir) {
                (Some(db), _) => db.clone(),
                (None, Some(dir)) => dir.join("node"),
                (None, None) => return fail(1, "serve needs --db PATH, or --store URL with --dir DIR"),
            };
            let store = match crate::stores::StoreSpec::from_args(db, store) {
                Ok(s) => s,
                Err(e) => return fail(1, e),
            };
            serve(crate::serve::ServeOptions {
                store,
                local,
                bind,
                workspace_root,
                exec_allow,
                host_callbacks,
                cache_bytes: (cache_mib as usize) << 20,
                metrics: !no_metrics,
                confine: confine.options(),
                worktree_quota_bytes: confine.worktree_quota_bytes(),
                task_limits: confine.task_limits(),
                print_connections,
                approval_ttl_s: approval_ttl,
                private_reads: reads.private_reads,
                connections_max: connections_max as usize,
                workers: workers.map_or_else(crate::limits::workers_default, |n| n as usize),
            })
        }
        Command::Quickstart { dir, store, bind, exec_allow, ask, ask_operator, reads, confine } => {
            let asks = session::Asks { anyone: &ask, operator: &ask_operator };
            quickstart::run(&dir, store, &bind, exec_allow, &asks, reads, confine)
        }
        Command::Approvals { at, json } => match at.spec() {
            Ok(spec) => approvals::list(&spec, json),
            Err(code) => code,
        },
        Command::Approve { at, id, for_session } => match at.spec() {
            Ok(spec) => {
                let verdict = if for_session { Verdict::ApproveForSession } else { Verdict::Approve };
                approvals::decide(&spec, &id, verdict, "")
            }
            Err(code) => code,
        },
        Command::Deny { at, id, note } => match at.spec() {
            Ok(spec) => approvals::decide(&spec, &id, Verdict::Deny, &note),
            Err(code) => code,
        },
        Command::Cancel { at, invocation_id } => match at.spec() {
            Ok(spec) => tasks::cancel(&spec, &invocation_id),
            Err(code) => code,
        },
        Command::Publish { at, manifest, builtin, replace } => match at.spec() {
            Ok(spec) => publish::run(&spec, manifest.as_deref(), builtin, replace),
            Err(code) => code,
        },
        Command::Session(SessionCommand::Mint { at, episode, grants, ask, ask_operator, ttl, out, yes }) => {
            match at.spec() {
                Ok(spec) => {
                    let asks = session::Asks { anyone: &ask, operator: &ask_operator };
                    session::mint(&spec, &episode, &grants, &asks, ttl, out.as_deref(), yes)
                }
                Err(code) => code,
            }
        }
        Command::Session(SessionCommand::List { at, json }) => match at.spec() {
            Ok(spec) => session::list(&spec, json),
            Err(code) => code,
        },
        Command::Session(SessionCommand::Revoke { at, credential_id }) => match at.spec() {
            Ok(spec) => session::revoke(&spec, &credential_id),
            Err(code) => code,
        },
        Command::Store(StoreCommand::Init { store }) => store_init(&store),
        Command::Verify { at, json, deep } => match at.spec() {
            Ok(spec) => verify::run(&spec, json, deep),
            Err(code) => code,
        },
        Command::Compact { db } => match locate::store(db, None) {
            Ok(crate::stores::StoreSpec::Embedded(db)) => compact::run(&db),
            Ok(_) => fail(1, "compact works on a store file (--db PATH); PostgreSQL reclaims space with VACUUM"),
            Err(e) => fail(2, e),
        },
        Command::Export { at, out, with_sessions } => match at.spec() {
            Ok(spec) => export::export_cmd(&spec, &out, with_sessions),
            Err(code) => code,
        },
        Command::Import { at, input } => match at.spec() {
            Ok(spec) => export::import_cmd(&spec, &input),
            Err(code) => code,
        },
        Command::Log { from, limit, daemon } => {
            let mut path = format!("/v1/log?from={from}");
            if let Some(l) = limit {
                path.push_str(&format!("&limit={l}"));
            }
            with_client(&daemon, |c| client::get_and_print(c, &path))
        }
        Command::Object { reference, payload, daemon } => {
            let suffix = if payload { "?payload=true" } else { "" };
            with_client(&daemon, |c| client::get_and_print(c, &format!("/v1/objects/{reference}{suffix}")))
        }
        Command::Why { target, daemon, json } => match client::Client::new(&daemon) {
            Ok(c) => why::run(&c, &target, json),
            Err(e) => fail(why::EXIT_UNREACHABLE, e),
        },
        Command::Head { daemon } => with_client(&daemon, |c| client::get_and_print(c, "/v1/head")),
        Command::Episodes { daemon, json, limit } => with_client(&daemon, |c| episodes::list(c, json, limit)),
        Command::Episode { episode, daemon, json, calls } => {
            with_client(&daemon, |c| episodes::one(c, &episode, json, calls))
        }
    }
}

/// Runs a client verb against the daemon `args` names, with its credential.
fn with_client(args: &DaemonArgs, verb: impl FnOnce(&client::Client) -> ExitCode) -> ExitCode {
    match client::Client::new(args) {
        Ok(c) => verb(&c),
        Err(e) => fail(1, e),
    }
}

fn store_init(url: &str) -> ExitCode {
    if let Err(e) = crate::stores::StoreSpec::from_args(None, Some(url.to_string())) {
        return fail(1, e);
    }
    match world_store::postgres::init(url) {
        Ok(m) if m.from == m.to => {
            say!("{}: schema is version {}, current", world_store::postgres::redacted(url), m.to);
            ExitCode::SUCCESS
        }
        Ok(m) => {
            say!("{}: schema version {} -> {}", world_store::postgres::redacted(url), m.from, m.to);
            ExitCode::SUCCESS
        }
        Err(e) => fail(2, e),
    }
}

pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let _ =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_target(false).try_init();
}

fn serve(opts: crate::serve::ServeOptions) -> ExitCode {
    init_tracing();
    // Startup, the accept loop, the admin socket and the sweeps; connections
    // are served on `opts.workers` lanes of their own (`serve::lanes`).
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => return fail(2, format!("daemon startup failed at runtime: {e}")),
    };
    match runtime.block_on(crate::serve::serve(opts)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(2, e),
    }
}

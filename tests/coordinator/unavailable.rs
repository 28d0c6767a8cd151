//! Where the kernel cannot confine runs, `serve` refuses to start and says
//! what is missing, unless the operator passes `--unconfined`. Simulated the
//! way it happens in practice: the daemon itself runs under a container-style
//! seccomp profile that forbids making namespaces.

use crate::harness::*;
use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// `unshare` and `setns` fail with `EPERM` for the daemon and everything it starts.
fn without_namespaces(cmd: &mut Command) {
    let rules = BTreeMap::from([(libc::SYS_unshare, vec![]), (libc::SYS_setns, vec![])]);
    let filter =
        SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), TargetArch::x86_64)
            .unwrap();
    let program: BpfProgram = filter.try_into().unwrap();
    // SAFETY: installing a prepared filter only makes the prctl and seccomp syscalls.
    unsafe {
        cmd.pre_exec(move || seccompiler::apply_filter(&program).map_err(|e| std::io::Error::other(e.to_string())));
    }
}

#[test]
fn serve_refuses_to_start_where_runs_cannot_be_confined_unless_told_unconfined() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (db, ws) = (root.join("world.db"), root.join("ws"));
    std::fs::create_dir_all(ws.join("ep")).unwrap();
    let args: Vec<String> =
        ["--workspace-root", ws.to_str().unwrap(), "--exec-allow", "sh=/bin/sh"].map(String::from).into();

    let mut cmd = Daemon::command(&db, &args);
    without_namespaces(&mut cmd);
    let o = crate::process::run(&mut cmd);
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "a startup failure: {stderr}");
    assert!(stderr.contains("daemon startup failed at confinement: this kernel cannot confine runs:"), "{stderr}");
    assert!(stderr.contains("unshare") && stderr.contains("EPERM"), "names what is missing: {stderr}");
    assert!(stderr.contains("pass --unconfined"), "names the way out: {stderr}");
    assert!(!stderr.contains("listening"), "{stderr}");

    let mut unconfined = args.clone();
    unconfined.push("--unconfined".into());
    let daemon = Daemon::start_with(&db, &unconfined, without_namespaces);
    let said = daemon.wait_stderr("confinement is OFF");
    assert!(said.contains("--unconfined"), "{said}");
    let mut reply = agent().get(&format!("http://{}/v1/health", daemon.addr)).call().unwrap();
    let health: serde_json::Value = serde_json::from_slice(&reply.body_mut().read_to_vec().unwrap()).unwrap();
    assert_eq!(health["confinement"], "unconfined", "{health}");
}

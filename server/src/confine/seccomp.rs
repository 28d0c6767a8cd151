//! The syscall filter of a confined run: a deny-list of what a confined
//! program never needs, compiled by `seccompiler` (x86-64 only; any other
//! architecture's calling convention, such as IA-32 `int 0x80`, kills the
//! process, so `socketcall` and friends cannot route around the rules).
//!
//! x32 syscalls share the x86-64 audit architecture and differ only by a bit
//! in the number; where the kernel has the x32 ABI, every denied call is
//! denied under its x32 numbers too. Where it has not (the usual case), they
//! fail with `ENOSYS` anyway and the shorter filter is cheaper to install.

use super::policy::Kind;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// The x32 ABI's syscalls carry this bit; each denied call is denied there too.
const X32_SYSCALL_BIT: i64 = 0x4000_0000;
/// x32-only syscall numbers (512 ..= 547), denied outright.
const X32_ONLY: std::ops::RangeInclusive<i64> = 512..=547;

/// Denied with `EPERM` in every run: tracing, mounts and namespaces, kernel
/// keyrings, bpf, perf, modules, reboot and the like, and io_uring (which
/// could open sockets without `socket`).
pub const DENIED_ALWAYS: &[(&str, i64)] = &[
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("kcmp", libc::SYS_kcmp),
    ("pidfd_getfd", libc::SYS_pidfd_getfd),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("fsopen", libc::SYS_fsopen),
    ("fsmount", libc::SYS_fsmount),
    ("fsconfig", libc::SYS_fsconfig),
    ("fspick", libc::SYS_fspick),
    ("move_mount", libc::SYS_move_mount),
    ("open_tree", libc::SYS_open_tree),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("acct", libc::SYS_acct),
    ("quotactl", libc::SYS_quotactl),
    ("syslog", libc::SYS_syslog),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
    ("clock_adjtime", libc::SYS_clock_adjtime),
    ("adjtimex", libc::SYS_adjtimex),
    ("sethostname", libc::SYS_sethostname),
    ("setdomainname", libc::SYS_setdomainname),
    ("iopl", libc::SYS_iopl),
    ("ioperm", libc::SYS_ioperm),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("lookup_dcookie", libc::SYS_lookup_dcookie),
    ("vhangup", libc::SYS_vhangup),
    ("fanotify_init", libc::SYS_fanotify_init),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
];

/// `clone` flags that make a namespace; `clone` with any of them is denied.
const NAMESPACE_FLAGS: &[u64] = &[
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWCGROUP as u64,
    0x80, // CLONE_NEWTIME
];

fn arch() -> TargetArch {
    TargetArch::x86_64
}

/// Whether this kernel runs x32 syscalls (probed with a harmless `getpid`).
pub fn kernel_has_x32() -> bool {
    // SAFETY: getpid under its x32 number: no arguments, no side effect.
    let r = unsafe { libc::syscall(libc::SYS_getpid | X32_SYSCALL_BIT) };
    !(r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS))
}

struct Rules {
    map: BTreeMap<i64, Vec<SeccompRule>>,
    x32: bool,
}

impl Rules {
    fn deny(&mut self, nr: i64, conditions: Vec<SeccompRule>) {
        if self.x32 {
            self.map.insert(nr | X32_SYSCALL_BIT, conditions.clone());
        }
        self.map.insert(nr, conditions);
    }
}

fn masked_set(arg: u8, bit: u64) -> Result<SeccompRule, String> {
    let c = SeccompCondition::new(arg, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(bit), bit)
        .map_err(|e| e.to_string())?;
    SeccompRule::new(vec![c]).map_err(|e| e.to_string())
}

/// The main filter: `EPERM` for everything denied to this kind of run. A
/// pure phase gets no socket at all; a command's sockets reach only what its
/// network namespace holds (its own loopback, unless the operator allowed
/// the host's network).
pub fn filter(kind: Kind, x32: bool) -> Result<BpfProgram, String> {
    let mut rules = Rules { map: BTreeMap::new(), x32 };
    for (_, nr) in DENIED_ALWAYS {
        rules.deny(*nr, vec![]);
    }
    if x32 {
        for nr in X32_ONLY {
            rules.map.insert(nr | X32_SYSCALL_BIT, vec![]);
        }
    }
    let ns: Vec<SeccompRule> = NAMESPACE_FLAGS.iter().map(|f| masked_set(0, *f)).collect::<Result<_, _>>()?;
    rules.deny(libc::SYS_clone, ns);
    if kind == Kind::Pure {
        for nr in [libc::SYS_socket, libc::SYS_connect, libc::SYS_bind, libc::SYS_listen] {
            rules.deny(nr, vec![]);
        }
    }
    let f = SeccompFilter::new(rules.map, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch())
        .map_err(|e| e.to_string())?;
    f.try_into().map_err(|e: seccompiler::BackendError| e.to_string())
}

/// `clone3` answers `ENOSYS`, so the C library falls back to `clone`, whose
/// flags the main filter can see (`clone3` passes them in memory).
pub fn clone3_filter(x32: bool) -> Result<BpfProgram, String> {
    answering(libc::SYS_clone3, libc::ENOSYS, x32)
}

/// A command's `fallocate` answers `EOPNOTSUPP`: it would reserve blocks of
/// the worktree without writing them, which the run's count of what it wrote
/// (and so its worktree's quota) cannot see; the C library's
/// `posix_fallocate` then writes the blocks, which are counted.
pub fn fallocate_filter(x32: bool) -> Result<BpfProgram, String> {
    answering(libc::SYS_fallocate, libc::EOPNOTSUPP, x32)
}

/// A filter under which syscall `nr` fails with `errno` and nothing else changes.
fn answering(nr: i64, errno: i32, x32: bool) -> Result<BpfProgram, String> {
    let mut rules = Rules { map: BTreeMap::new(), x32 };
    rules.deny(nr, vec![]);
    let f = SeccompFilter::new(rules.map, SeccompAction::Allow, SeccompAction::Errno(errno as u32), arch())
        .map_err(|e| e.to_string())?;
    f.try_into().map_err(|e: seccompiler::BackendError| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_compiles_and_a_pure_phase_gets_the_strictest() {
        for x32 in [false, true] {
            let pure = filter(Kind::Pure, x32).unwrap();
            let exec = filter(Kind::Exec, x32).unwrap();
            assert!(!clone3_filter(x32).unwrap().is_empty());
            assert!(pure.len() > exec.len(), "{} {}", pure.len(), exec.len());
        }
        let (native, both) = (filter(Kind::Exec, false).unwrap(), filter(Kind::Exec, true).unwrap());
        assert!(
            both.len() > native.len() + DENIED_ALWAYS.len(),
            "x32 numbers are denied too where the kernel has them"
        );
    }

    #[test]
    fn the_deny_list_names_each_call_once_and_keeps_what_programs_need() {
        let mut names: Vec<&str> = DENIED_ALWAYS.iter().map(|(n, _)| *n).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), DENIED_ALWAYS.len());
        for needed in ["execve", "clone", "clone3", "socketpair", "wait4", "kill", "prctl"] {
            assert!(!names.contains(&needed), "{needed} must stay allowed");
        }
        for must in ["ptrace", "mount", "unshare", "setns", "keyctl", "bpf", "perf_event_open", "io_uring_setup"] {
            assert!(names.contains(&must), "{must}");
        }
    }
}

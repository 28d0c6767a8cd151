"""escape.py: the hostile-program corpus. One program, one escape attempt per name.

Two ways to run it, one attempt per run:
  pure transition  stdin is the args object {"attempt": NAME, ...params}
                   (the exec runtime runs it as `python3 transition`);
  command          python3 escape.py NAME '<params json>'
                   (`workspace-exec` runs it in the episode's worktree).

Outcome, on stderr, one line:
  ALLOWED <name> <detail>   the escape worked: exit 0, and in pure mode stdout
                            is {"escaped": NAME} (so the phase would commit);
  DENIED <name> <reason>    the attempt was blocked: exit 3; the reason is the
                            errno name (EACCES, ENOENT, EPERM, ...) or the
                            exception class (MemoryError, ...), or what this
                            program saw instead of the escape.
Anything else (a bug here, a missing param) is a traceback and exit 1: never
DENIED, so a typo cannot pass for a block.

Params (only those an attempt uses are sent): marker, outside, store,
store_dir, token, admin_socket, port, udp_port, daemon_pid, neighbour,
late_dir, link.
"""

import ctypes
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time


class Denied(Exception):
    """Blocked in a way that raises no OSError; the message is the reason."""


ATTEMPTS = {}


def attempt(name):
    def register(fn):
        ATTEMPTS[name] = fn
        return fn

    return register


def errno_name(e):
    if isinstance(e, OSError) and e.errno:
        return errno.errorcode.get(e.errno, type(e).__name__)
    return type(e).__name__


def libc():
    return ctypes.CDLL(None, use_errno=True)


def check(ret):
    """A libc return value: -1 raises the OSError of errno."""
    if ret == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return ret


# --- Files outside the sandbox ---------------------------------------------


@attempt("write-outside")
def write_outside(p):
    path = os.path.join(p["outside"], "escape-" + p["marker"])
    with open(path, "x") as f:
        f.write("escaped\n")
    return "wrote " + path


@attempt("write-tmp")
def write_tmp(p):
    path = "/tmp/" + p["marker"]
    with open(path, "x") as f:
        f.write("escaped\n")
    return "wrote " + path


@attempt("read-shadow")
def read_shadow(p):
    with open("/etc/shadow", "rb") as f:
        return "read %d bytes of /etc/shadow" % len(f.read())


@attempt("read-store")
def read_store(p):
    with open(p["store"], "rb") as f:
        return "read %d bytes of the store" % len(f.read(4096))


@attempt("write-store")
def write_store(p):
    # Opened for writing and closed: proves write access without writing a byte.
    fd = os.open(p["store"], os.O_WRONLY)
    os.close(fd)
    return "opened the store for writing"


@attempt("read-token")
def read_token(p):
    with open(p["token"], "rb") as f:
        return "read a %d-byte session token" % len(f.read().strip())


@attempt("list-store-dir")
def list_store_dir(p):
    names = os.listdir(p["store_dir"])
    # A sandbox may show an empty skeleton of the directory (the mount point of
    # a deeper bind); only seeing the store in it is an escape.
    store = os.path.basename(p["store"])
    if store not in names:
        raise Denied("store-hidden (%d entries)" % len(names))
    return "listed %d entries, the store among them" % len(names)


@attempt("read-other-episode")
def read_other_episode(p):
    with open(p["neighbour"], "rb") as f:
        return "read %d bytes of another episode's worktree" % len(f.read())


@attempt("follow-symlink")
def follow_symlink(p):
    target = os.readlink(p["link"])
    with open(p["link"], "rb") as f:
        return "read %d bytes through %s -> %s" % (len(f.read()), p["link"], target)


@attempt("read-daemon-environ")
def read_daemon_environ(p):
    with open("/proc/%d/environ" % p["daemon_pid"], "rb") as f:
        return "read %d bytes of the daemon's environment" % len(f.read())


@attempt("write-git-config")
def write_git_config(p):
    with open(".git/config", "a") as f:
        f.write("# %s\n" % p["marker"])
    return "appended to .git/config"


@attempt("rename-git")
def rename_git(p):
    away = ".git-" + p["marker"]
    os.rename(".git", away)
    os.rename(away, ".git")  # put back, so the rest of the run sees a worktree
    return "renamed .git away (and back)"


# --- Sockets -----------------------------------------------------------------


@attempt("connect-daemon")
def connect_daemon(p):
    with socket.create_connection(("127.0.0.1", p["port"]), timeout=2):
        return "connected to the daemon's port %d" % p["port"]


@attempt("connect-admin-socket")
def connect_admin_socket(p):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(2)
        s.connect(p["admin_socket"])
        return "connected to the admin socket"


@attempt("connect-outbound")
def connect_outbound(p):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1)
        try:
            s.connect(("10.255.255.1", 80))
        except TimeoutError:
            # Unanswered, but the SYN left: there was a route out. A sandbox
            # without a network fails at once (ENETUNREACH).
            return "no answer from 10.255.255.1:80 in 1 s, but a route out exists"
        return "connected to 10.255.255.1:80"


@attempt("udp-loopback")
def udp_loopback(p):
    # The test listens on this port and echoes; a reply proves the datagram
    # reached the host's loopback (a sandbox's own loopback has no listener).
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(1)
        s.sendto(("hostile " + p["marker"]).encode(), ("127.0.0.1", p["udp_port"]))
        try:
            data, _ = s.recvfrom(256)
        except TimeoutError:
            raise Denied("no-echo")
        return "the host's listener echoed %r" % data


# --- Resources -----------------------------------------------------------------


@attempt("fork-bomb")
def fork_bomb(p):
    # Each child is named after the marker (as /proc/PID/comm shows), so the
    # test can find one that outlives the run.
    PR_SET_NAME = 15
    prctl, comm = libc().prctl, ctypes.c_char_p(p["marker"].encode()[:15])
    kids = []
    try:
        for _ in range(5000):
            pid = os.fork()
            if pid == 0:
                try:
                    prctl(PR_SET_NAME, comm, 0, 0, 0)
                    for fd in range(10):  # never hold the runner's pipes open
                        try:
                            os.close(fd)
                        except OSError:
                            pass
                    time.sleep(30)
                finally:
                    os._exit(0)
            kids.append(pid)
    except OSError as e:
        raise Denied("%s after %d forks" % (errno_name(e), len(kids)))
    finally:
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in kids:
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
    return "%d processes forked" % len(kids)


@attempt("alloc-8g")
def alloc_8g(p):
    buf = bytearray(8 << 30)
    return "allocated %d GiB" % (len(buf) >> 30)


@attempt("file-size")
def file_size(p):
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a signal
    path = "big-" + p["marker"]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.lseek(fd, 2 << 30, os.SEEK_SET)
        os.write(fd, b"x")
    finally:
        os.close(fd)
        os.unlink(path)
    return "wrote one byte at offset 2 GiB"


# --- Processes outside the sandbox ----------------------------------------------


def same_pid_namespace_as(pid):
    try:
        return os.readlink("/proc/self/ns/pid") == os.readlink("/proc/%d/ns/pid" % pid)
    except OSError:
        return False


@attempt("setsid-linger")
def setsid_linger(p):
    late = os.path.abspath(os.path.join(p["late_dir"], "late-" + p["marker"]))
    script = "sleep 3; echo late > '%s'; sleep 30" % late
    # Pipes, not the runner's stdio (nor /dev/null, which a sandbox may lack).
    kid = subprocess.Popen(
        ["/bin/sh", "-c", script, "linger-" + p["marker"]],
        start_new_session=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    # It can only be proved from here if nothing but a process-group kill could
    # stop it: it left my session and shares the daemon's pid namespace. The
    # test looks for it (and its late file) afterwards either way.
    if os.getsid(kid.pid) != os.getsid(0) and same_pid_namespace_as(p["daemon_pid"]):
        return "pid %d left in its own session, in the daemon's pid namespace" % kid.pid
    raise Denied("unproven (pid %d spawned; the test checks it is gone)" % kid.pid)


@attempt("signal-daemon")
def signal_daemon(p):
    os.kill(p["daemon_pid"], 0)  # signal 0: reachability only, never a real signal
    return "the daemon (pid %d) can be signalled" % p["daemon_pid"]


@attempt("ptrace-daemon")
def ptrace_daemon(p):
    # PTRACE_SEIZE passes the same access check as PTRACE_ATTACH but never
    # stops the daemon; the kernel detaches when this process exits.
    PTRACE_SEIZE = 0x4206
    c = libc()
    c.ptrace.restype = ctypes.c_long
    c.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    check(c.ptrace(PTRACE_SEIZE, p["daemon_pid"], None, None))
    return "attached to the daemon (pid %d) with ptrace" % p["daemon_pid"]


@attempt("unshare-user")
def unshare_user(p):
    CLONE_NEWUSER = 0x10000000
    check(libc().unshare(CLONE_NEWUSER))
    return "entered a new user namespace"


@attempt("io-uring")
def io_uring(p):
    SYS_io_uring_setup = 425
    c = libc()
    c.syscall.restype = ctypes.c_long
    params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
    fd = check(c.syscall(ctypes.c_long(SYS_io_uring_setup), ctypes.c_uint(1), params))
    os.close(fd)
    return "io_uring_setup returned a ring"


# --- Driver ---------------------------------------------------------------------


def main():
    pure = len(sys.argv) < 2
    if pure:
        params = json.loads(sys.stdin.read())
        name = params.pop("attempt")
    else:
        name = sys.argv[1]
        params = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    run = ATTEMPTS[name]  # an unknown name is a KeyError, not a DENIED
    try:
        detail = run(params)
    except Denied as e:
        reason = str(e)
    except (OSError, MemoryError) as e:
        reason = errno_name(e)
    else:
        sys.stderr.write("ALLOWED %s %s\n" % (name, detail))
        if pure:
            sys.stdout.write(json.dumps({"escaped": name}))
        sys.exit(0)
    sys.stderr.write("DENIED %s %s\n" % (name, reason))
    sys.exit(3)


if __name__ == "__main__":
    main()

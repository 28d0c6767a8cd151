#!/bin/sh
# escape.sh: the shell's share of the hostile-program corpus (see escape.py).
#
#   sh escape.sh NAME ARG...     one escape attempt, run by `workspace-exec`
#
# Outcome on stderr, as escape.py: "ALLOWED <name> <detail>" and exit 0 when
# the escape worked; "DENIED <name> <reason>" and exit 3 when it was blocked.
# Anything else (a bad name, missing arguments) exits 1 and is never DENIED.
#
#   sh-write-outside  OUTSIDE MARKER              write OUTSIDE/escape-sh-MARKER
#   sh-setsid-linger  LATE_DIR MARKER DAEMON_PID  leave a setsid grandchild behind
#   sh-fork-bomb      MARKER                      up to 5000 background sleeps

name=$1
[ $# -ge 1 ] && shift

allowed() {
	echo "ALLOWED $name $*" >&2
	exit 0
}

denied() {
	echo "DENIED $name $*" >&2
	exit 3
}

# The errno behind one of the shell's own error messages.
errno_of() {
	case $1 in
	*"Permission denied"*) echo EACCES ;;
	*"Read-only file system"*) echo EROFS ;;
	*"No such file"* | *"nonexistent"*) echo ENOENT ;;
	*"Operation not permitted"*) echo EPERM ;;
	*"No space left"*) echo ENOSPC ;;
	*"Cannot fork"* | *"Resource temporarily unavailable"*) echo EAGAIN ;;
	*) echo "sh-error" ;;
	esac
}

usage() {
	echo "escape.sh: $name: expected $1" >&2
	exit 1
}

# Field 6 of /proc/PID/stat: the session id.
session_of() {
	read -r _ _ _ _ _ sid _ <"/proc/$1/stat" && echo "$sid"
}

case $name in
sh-write-outside)
	[ $# -eq 2 ] || usage "OUTSIDE MARKER"
	f="$1/escape-sh-$2"
	if err=$({ echo escaped >"$f"; } 2>&1); then
		allowed "wrote $f"
	fi
	denied "$(errno_of "$err")"
	;;
sh-setsid-linger)
	[ $# -eq 3 ] || usage "LATE_DIR MARKER DAEMON_PID"
	late="$1/late-$2"
	# stdio closed, not /dev/null (a sandbox may lack it), never the runner's pipes.
	setsid /bin/sh -c "sleep 3; echo late > '$late'; sleep 30" "linger-$2" <&- >&- 2>&- &
	kid=$!
	# Proved only if nothing but a process-group kill could stop it: it left
	# this session and shares the daemon's pid namespace. The test looks for
	# it (and its late file) afterwards either way.
	n=0
	while [ $n -lt 20 ] && [ "$(session_of $kid 2>&-)" != "$kid" ]; do
		sleep 0.1
		n=$((n + 1))
	done
	mine=$(session_of $$ 2>&-)
	theirs=$(session_of $kid 2>&-)
	ns=$(readlink /proc/$$/ns/pid 2>&-)
	daemon_ns=$(readlink "/proc/$3/ns/pid" 2>&-)
	if [ -n "$theirs" ] && [ "$theirs" != "$mine" ] && [ -n "$ns" ] && [ "$ns" = "$daemon_ns" ]; then
		allowed "pid $kid left in its own session, in the daemon's pid namespace"
	fi
	denied "unproven (pid $kid spawned; the test checks it is gone)"
	;;
sh-fork-bomb)
	[ $# -eq 1 ] || usage "MARKER"
	i=0
	pids=
	# The shell exits when a fork fails ("Cannot fork"); its EXIT trap reports
	# the block. Either way the sleeps it made are killed before it exits.
	trap 'trap - EXIT; kill -KILL $pids 2>&-; echo "DENIED $name EAGAIN after $i forks" >&2; exit 3' EXIT
	while [ $i -lt 5000 ]; do
		sleep 30 <&- >&- 2>&- &
		pids="$pids $!"
		i=$((i + 1))
	done
	trap - EXIT
	kill -KILL $pids 2>&-
	allowed "$i background processes"
	;;
*)
	echo "escape.sh: unknown attempt ${name:-(none)}" >&2
	exit 1
	;;
esac

#!/usr/bin/env bash
# locked.sh LOCK CMD...: run CMD holding LOCK (flock), and say how long it
# waited. make's VM_LOCK: on a machine several people share, every image
# build, VM run and apiserver run takes its turn (a test's own time is then
# told apart from its wait).
set -euo pipefail
lock=${1:?usage: locked.sh LOCK CMD...}
shift
t0=$SECONDS
exec 9>>"$lock"
# Already held by one of our ancestors (flock LOCK make test VM_LOCK=LOCK):
# waiting for it would wait for ourselves.
read -r major minor ino < <(stat -Lc '%Hd %Ld %i' "$lock")
id=$(printf '%02x:%02x:%s' "$major" "$minor" "$ino") # as /proc/locks names the file
holders=$(awk -v id="$id" '$2 == "FLOCK" && $6 == id {print $5}' /proc/locks)
p=$PPID
while [[ -n $holders && $p -gt 1 ]]; do
	[[ " $holders " != *" $p "* ]] || { exec 9>&-; exec "$@"; }
	p=$(awk '/^PPid:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
done
flock 9
[[ $((SECONDS - t0)) -lt 2 ]] || echo "locked.sh: waited $((SECONDS - t0)) s for $lock: $*" >&2
# CMD does not inherit the lock: a process it leaves behind (a daemon a test
# failed to end) must not hold everyone's turn after CMD is done. A TERM or
# INT sent to this script alone is passed on to CMD.
set +e
"$@" 9>&- <&0 &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT HUP
while :; do
	wait "$child"
	rc=$?
	kill -0 "$child" 2>/dev/null || break
done
exit "$rc"

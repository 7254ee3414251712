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
flock 9
[[ $((SECONDS - t0)) -lt 2 ]] || echo "locked.sh: waited $((SECONDS - t0)) s for $lock: $*" >&2
exec "$@"

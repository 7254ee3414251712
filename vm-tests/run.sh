#!/usr/bin/env bash
# Run scenario scripts on Debian VMs: build (or reuse) the image, stage this
# checkout's binaries and units, boot the script's nodes in a private network
# namespace, print a summary per script.
# usage: run.sh ARCH SCRIPT.py...      (env: VM_WORK=cache dir, VM_MEMORY=MiB, VM_SMP=vCPUs)
set -euo pipefail
ARCH=${1:?usage: run.sh ARCH SCRIPT.py...}
shift
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${VM_WORK:-$HERE/.work}
t0=$SECONDS
"$HERE/image.sh" "$ARCH" "$WORK/$ARCH"
# The image this run boots, resolved once: a newer one published meanwhile
# (another checkout's recipe) does not mix into the run.
IMAGE=$(readlink -f "$WORK/$ARCH")
"$HERE/initrd.sh" "$IMAGE"
t_image=$((SECONDS - t0))
"$HERE/stage.sh" "$ARCH" "$WORK/$ARCH-run/opt.ext4"
rc=0
for script in "$@"; do
	name=$(basename "$script" .py)
	python3 "$HERE/driver/run.py" --arch "$ARCH" --image "$IMAGE" --opt "$WORK/$ARCH-run/opt.ext4" \
		--memory "${VM_MEMORY:-384}" --smp "${VM_SMP:-1}" --run-dir "$WORK/$ARCH-run/$name" "$script" || rc=1
done
echo "run.sh: $ARCH: image ${t_image} s, total $((SECONDS - t0)) s, exit $rc"
exit $rc

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
# The binaries this run stages, its own file: two runs of one architecture
# may go side by side (ci.sh), and one must not restage the other's.
mkdir -p "$WORK/$ARCH-run"
OPT=$(mktemp "$WORK/$ARCH-run/opt.XXXXXX.ext4")
trap 'rm -f "$OPT"' EXIT
# Scripts that install the .deb say so (`# stage: debs`): an old and a new
# version, for upgrades and downgrades.
if grep -qx '# stage: debs' "$@"; then
	export VM_STAGE_DEBS=${VM_STAGE_DEBS:-0.1.0 0.1.1}
fi
# Scripts that upgrade the binary say so (`# stage: upgrade`): a second
# build of vipproxy, another version stamped.
if grep -qx '# stage: upgrade' "$@"; then
	export VM_STAGE_UPGRADE=1
fi
"$HERE/stage.sh" "$ARCH" "$OPT"
# Each script's output is also kept in ARCH-run/NAME.out.
rc=0 results=
for script in "$@"; do
	name=$(basename "$script" .py)
	t_script=$SECONDS
	if python3 "$HERE/driver/run.py" --arch "$ARCH" --image "$IMAGE" --opt "$OPT" \
		--memory "${VM_MEMORY:-384}" --smp "${VM_SMP:-1}" --run-dir "$WORK/$ARCH-run/$name" "$script" \
		2>&1 | tee "$WORK/$ARCH-run/$name.out"; then
		verdict=PASS
	else
		verdict=FAIL rc=1
	fi
	results="$results${results:+, }$name $verdict $((SECONDS - t_script)) s"
done
echo "run.sh: $ARCH: $results; image ${t_image} s, total $((SECONDS - t0)) s, exit $rc"
exit $rc

#!/usr/bin/env bash
# Offline checks of the Nix side (no nixpkgs, no network, no /nix):
#   check.sh parse              every .nix file parses
#   check.sh lib                nix/lib.nix gives the expected outputs (tests/lib-cases.nix)
#   check.sh module             nix/module.nix evaluates (fake lib) and sets/asserts as expected
#   check.sh nixos              nix/module.nix with the real nixpkgs lib ($NIXPKGS_LIB or the cache) and NixOS'
#                               option declarations (tests/nixos-eval.nix); planted breaks caught
#   check.sh agree VIPPROXY     lib.nix and the Go renderer agree (tests/agree.py), on
#                               tests/cases and on random configs that pass check
#   check.sh units              lib.nix's unit settings ([Unit], [Install], [Socket], [Service])
#                               equal systemd/vipproxy.{socket,service}
#   check.sh flake              flake.nix's outputs evaluate against a stub nixpkgs (tests/flake-eval.nix)
#   check.sh pyflakes           the VM scenario scripts lint clean with the driver's globals
#   check.sh fileset            nix/package.nix's src holds every directory the commands import
#   check.sh vendor-hash [--write]  nix/package.nix's vendorHash matches `go mod vendor`
#   check.sh all VIPPROXY       all of the above
set -euo pipefail
cd "$(dirname "$0")/../.."

# Nix 2.8 from Debian with a private store: nothing touches /nix or the network.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/vipproxy-nix.XXXXXX")
trap 'chmod -R u+w "$scratch" 2>/dev/null; rm -rf "$scratch"' EXIT
mkdir -p "$scratch/conf" "$scratch/store"
cat >"$scratch/conf/nix.conf" <<CONF
store = local?root=$scratch/store
build-users-group =
sandbox = false
substituters =
experimental-features = nix-command flakes
CONF
export NIX_CONF_DIR="$scratch/conf" NIX_STATE_DIR="$scratch/state" NIX_LOG_DIR="$scratch/log"
export XDG_CACHE_HOME="$scratch/cache"

nix_files() { git ls-files --cached --others --exclude-standard -- '*.nix'; }

check_parse() {
	local n=0 f
	while IFS= read -r f; do
		[ -f "$f" ] || continue
		nix-instantiate --parse "$f" >/dev/null
		n=$((n + 1))
	done < <(nix_files)
	echo "parse: $n .nix files parse"
}

check_lib() {
	local out
	out=$(nix-instantiate --eval --strict --json nix/tests/lib-cases.nix)
	if [ "$out" != "[]" ]; then
		echo "lib: nix/lib.nix gave unexpected results: $out" >&2
		return 1
	fi
	echo "lib: $(grep -c '^    [A-Za-z0-9]* = {$' nix/tests/lib-cases.nix) cases as expected"
}

check_module() {
	local out
	out=$(nix-instantiate --eval --strict --json nix/tests/module-eval.nix)
	python3 -c '
import json, sys
out = json.loads(sys.argv[1])
if out["failed"]:
    sys.exit("module: nix/module.nix (with a fake lib) failed: %s" % out["failed"])
print("module: nix/module.nix evaluates with a fake lib; %d expectations hold" % out["count"])' "$out"
}

# The four hand-written cases, and random configs that pass `vipproxy check`
# drawn by the Go property test's generator (service/cli/agree_test.go).
check_agree() {
	mkdir -p "$scratch/random"
	VIPPROXY_AGREE_DIR="$scratch/random" go test -count=1 -run '^TestWriteAgree(Cases|Defaults)$' ./service/cli >/dev/null
	python3 nix/tests/agree.py --go-defaults "$scratch/random/defaults.json" "$1" nix/tests/cases/*.toml "$scratch"/random/*.toml
}

# The real nixpkgs lib (never in this repository): $NIXPKGS_LIB, else the
# machine's cache. CI runs a fresh clone on a machine that cannot reach
# GitHub: it has the lib only when that machine's cache holds it.
NIXPKGS_LIB_CACHE=${NIXPKGS_LIB_CACHE:-/var/cache/vipproxy-nixpkgs-lib}
nixpkgs_lib() {
	local d=${NIXPKGS_LIB:-$NIXPKGS_LIB_CACHE}
	if [ -f "$d/compat.nix" ] && [ -f "$d/lib/default.nix" ]; then
		(cd "$d" && pwd)
	elif [ -n "${NIXPKGS_LIB:-}" ]; then
		# Asked for by name: a wrong folder is an error, not a quiet skip.
		echo "nixos: FAIL: NIXPKGS_LIB=$NIXPKGS_LIB holds no lib/default.nix and compat.nix" >&2
		return 1
	fi
}

# How to bring the lib onto a machine (printed where it is absent).
nixpkgs_lib_recipe() {
	cat <<RECIPE
nixos: NOT COVERED: the real nixpkgs lib is not on this machine (looked in \$NIXPKGS_LIB=${NIXPKGS_LIB:-<unset>} and $NIXPKGS_LIB_CACHE).
nixos:   The module is checked against the real lib.evalModules only where the lib is cached; to cache it:
nixos:   1. fetch a snapshot of github:nix-community/nixpkgs.lib (the search tools' fetch, or git clone
nixos:      https://github.com/nix-community/nixpkgs.lib where GitHub is reachable);
nixos:   2. mkdir -p $NIXPKGS_LIB_CACHE and copy its lib/ folder to $NIXPKGS_LIB_CACHE/lib;
nixos:   3. copy /work/shared/nixpkgs-compat.nix (it imports lib 26.11 on Debian's Nix 2.8) to $NIXPKGS_LIB_CACHE/compat.nix;
nixos:   4. check: nix-instantiate --eval --strict -E '(import $NIXPKGS_LIB_CACHE/compat.nix).version'
nixos:   (or point NIXPKGS_LIB at another folder holding lib/ and compat.nix). Never commit it.
RECIPE
}

nixos_eval() {
	nix-instantiate --eval --strict --json nix/tests/nixos-eval.nix \
		--arg lib "import $1/compat.nix" --arg module "$2" 2>"$scratch/nixos-eval.err"
}

# Breaks planted in a copy of nix/ that the real-lib evaluation must catch:
# FILE|SED EXPRESSION|WHAT.
NIXOS_PLANTS='lib.nix|s/virtualRouterId = k.router_id;/virtualRouterId = toString k.router_id;/|a wrong type (virtualRouterId as a string)
module.nix|s/networking.firewall.extraInputRules = /networking.firewall.extraInputRule = /|a wrong option name (extraInputRule)
lib.nix|s/LinkLocalAddressing = "no";/LinkLocalAdressing = "no";/|a misspelt [Network] field
module.nix|s/^          enable = true;$/          enable = true; openFirewall = cfg.openFirewall;/|keepalived.openFirewall passed on (iptables rules on an nftables node)
module.nix|s#vlib.vrrpScript "${exe} probe#vlib.vrrpScript "/usr/bin/vipproxy probe#|a /usr/bin command in the rendered vrrp_script
module.nix|s/onVip = server \&\& listeners != \[ \];/onVip = false;/|no assertion on a k3s or RKE2 server on *:6443 or RKE2 supervisor on *:9345
lib.nix|s/bind = lastFlag "bind-address" "0.0.0.0" flags;/bind = lastFlag "bind-address" "127.0.0.1" flags;/|a wrong default bind address for k3s and the RKE2 supervisor
lib.nix|s/host = if apiserverBind == null then "0.0.0.0" else apiserverBind;/host = if apiserverBind == null then bind else apiserverBind;/|RKE2 kube-apiserver at --bind-address (it stays on *:6443)
lib.nix|s/!(l.sharesPort \&\& isWildcard l.host \&\& (withDefaults settings).vip.reuse_port)/!(isWildcard l.host \&\& (withDefaults settings).vip.reuse_port)/|vip.reuse_port sharing 6443 without kube-apiserver permit-port-sharing
lib.nix|s/port = "9345";/port = "6443";/|RKE2 supervisor not on 9345
lib.nix|s/stopIfChanged = false;/stopIfChanged = true;/|stopIfChanged back to its default (a package upgrade stops the socket: the VIP port refuses)
module.nix|s/reloadTriggers = \[ configFile \];/restartTriggers = [ configFile ];/|a settings change restarting the daemon instead of reloading it
module.nix|s/lib.mkIf networkdForVipOnly (/lib.mkIf true (/|networkd.conf taken over where networkd runs the node'

check_nixos() {
	local lib out plant file expr what copy
	lib=$(nixpkgs_lib) || return 1
	if [ -z "$lib" ]; then
		nixpkgs_lib_recipe
		return
	fi
	out=$(nixos_eval "$lib" ./nix/module.nix) || { cat "$scratch/nixos-eval.err" >&2; return 1; }
	python3 -c '
import json, sys
out = json.loads(sys.argv[1])
bad = {k: v for k, v in out["cases"].items() if v != "ok"}
bad.update({k: v for k, v in out["planted"].items() if v != "caught"})
for k, v in bad.items():
    print(f"nixos: FAIL: {k}: {v}", file=sys.stderr)
cases, planted = out["cases"], out["planted"]
caught = ", ".join(k for k, v in planted.items() if v == "caught")
names = ", ".join(cases)
print(f"nixos: nix/module.nix with the real nixpkgs lib: {len(cases) - len(bad)}/{len(cases)} node configurations"
      f" as expected ({names}); planted breaks caught: {caught}")
sys.exit(1 if bad else 0)' "$out"
	while IFS='|' read -r file expr what; do
		copy="$scratch/plant"
		rm -rf "$copy" && mkdir -p "$copy" && cp -r nix "$copy/"
		sed -i "$expr" "$copy/nix/$file"
		if cmp -s "nix/$file" "$copy/nix/$file"; then
			echo "nixos: FAIL: the plant '$what' no longer applies to nix/$file: update NIXOS_PLANTS" >&2
			return 1
		fi
		if out=$(nixos_eval "$lib" "$copy/nix/module.nix") && ! grep -q '"cases":{[^}]*"failing assertions' <<<"$out" &&
			! grep -q '"cases":{[^}]*"evaluates, but' <<<"$out"; then
			echo "nixos: FAIL: $what in nix/$file was not caught" >&2
			return 1
		fi
		echo "nixos: planted in nix/$file: $what: caught"
	done <<<"$NIXOS_PLANTS"
}

# [Section] Key=Value lines of a unit file (continuations and comments dropped).
unit_entries() {
	sed -n "/^\[$2\]/,/^\[/p" "$1" | grep -E '^[A-Za-z]+=' | sort
}

# nix_entries EXPR: the Key=Value lines of a lib.nix attribute set of unit
# settings, as a unit file writes them (a list: the key once per element).
nix_entries() {
	nix-instantiate --eval --strict --json -E "$1" | python3 -c '
import json, sys
for k, v in json.load(sys.stdin).items():
    for one in (v if isinstance(v, list) else [v]):
        print(f"{k}={one}")' | sort
}

# nix_unit_entries EXPR: the [Unit] and [Install] lines of a lib.nix set of
# NixOS unit options (description, after, wantedBy...).
nix_unit_entries() {
	nix-instantiate --eval --strict --json -E "$1" | python3 -c '
import json, sys
keys = {"description": "Description", "documentation": "Documentation", "requires": "Requires",
        "after": "After", "wants": "Wants", "before": "Before", "wantedBy": "WantedBy", "partOf": "PartOf"}
for k, v in json.load(sys.stdin).items():
    print(keys[k] + "=" + (" ".join(v) if isinstance(v, list) else v))' | sort
}

# unit_agrees FILE SECTION EXPR [SKIP]: FILE's [SECTION] lines (less those
# matching SKIP) equal lib.nix's EXPR; SECTION "Unit" means [Unit] and
# [Install], SECTION "Exec" the Exec lines of [Service] or [Socket].
unit_agrees() {
	local file=$1 section=$2 expr=$3 skip=${4:-^$}
	case $section in
	Unit)
		diff -u --label "$file [Unit] and [Install]" --label "nix/lib.nix $expr" \
			<( (unit_entries "$file" Unit; unit_entries "$file" Install) | sort) <(nix_unit_entries "(import ./nix/lib.nix).$expr")
		;;
	Exec)
		local in=Service
		[[ $file == *.socket ]] && in=Socket
		diff -u --label "$file Exec lines" --label "nix/lib.nix $expr" \
			<(unit_entries "$file" "$in" | grep -E '^Exec') <(nix_entries "(import ./nix/lib.nix).$expr")
		;;
	*)
		diff -u --label "$file [$section]" --label "nix/lib.nix $expr" \
			<(unit_entries "$file" "$section" | grep -Ev "$skip") <(nix_entries "(import ./nix/lib.nix).$expr")
		;;
	esac
}

check_units() {
	local svc=systemd/vipproxy.service sock=systemd/vipproxy.socket
	local tmpl=systemd/vipproxy-port@.socket ann=systemd/vipproxy-announce.service
	if [ ! -f "$svc" ] || [ ! -f "$sock" ]; then
		echo "units: FAIL: $svc or $sock is missing" >&2
		return 1
	fi
	# Everything but the lines that name paths or the listen address, which
	# the module sets from its own package and settings.
	local skip='^(ExecStart|ExecStartPre|ExecReload|ExecStop|ListenStream)='
	# The command lines are checked for the binary and config at their
	# Debian paths.
	local paths='"/usr/bin/vipproxy" "/etc/vipproxy/vipproxy.toml"'
	unit_agrees "$sock" Socket socketConfig "$skip"
	unit_agrees "$svc" Service serviceConfig "$skip"
	unit_agrees "$svc" Exec "serviceExec $paths"
	unit_agrees "$sock" Exec "socketExec $paths"
	unit_agrees "$sock" Unit socketUnit
	unit_agrees "$svc" Unit serviceUnit
	# The port template, vipproxy-port@.socket: its settings with %i as the name.
	unit_agrees "$tmpl" Socket 'portSocketConfig "%i"' "$skip"
	diff -u --label "$tmpl [Unit]" --label "nix/lib.nix portSocketUnit" \
		<(unit_entries "$tmpl" Unit | sort) <(nix_unit_entries '(import ./nix/lib.nix).portSocketUnit "%i"')
	# vipproxy-announce.service (bgp mode): [Service], Exec lines, [Unit] and [Install].
	unit_agrees "$ann" Service announceConfig "$skip"
	unit_agrees "$ann" Exec "announceExec $paths"
	unit_agrees "$ann" Unit announceUnit
	echo "units: nix/lib.nix [Unit], [Install], [Socket] and [Service] equal $sock, $tmpl, $svc and $ann"
}

check_pyflakes() {
	local prelude=vm-tests/prelude.py scripts=() s out rc=0
	local skip
	skip=$(wc -l <"$prelude")
	for s in vm-tests/*.py; do
		[ "$s" = "$prelude" ] || scripts+=("$s")
	done
	# Each script as nixos.nix hands it to runNixOSTest, which lints it:
	# prelude.py, then the script. The NixOS test driver's globals and the
	# node names the scripts use are builtins; a finding names the
	# script's own line.
	for s in "${scripts[@]}"; do
		if ! out=$(cat "$prelude" "$s" | PYFLAKES_BUILTINS="start_all,subtest,machines,vlans,driver,log,retry,serial_stdout_off,serial_stdout_on,polling_condition,Machine,client,cp1,cp2,cp3,router" pyflakes3 2>&1); then
			awk -v f="$s" -v n="$skip" 'BEGIN { FS = ":" } { line = $2 - n; sub(/^[^:]*:[^:]*:/, ""); print f ":" line ":" $0 }' <<<"$out" >&2
			rc=1
		fi
	done
	[ $rc = 0 ] || return 1
	echo "pyflakes: ${#scripts[@]} VM test scripts clean, each after $prelude"
}

check_flake() {
	nix-instantiate --eval --strict --json nix/tests/flake-eval.nix | python3 -c '
import json, sys
out = json.load(sys.stdin)
problems = []
def want(cond, what):
    if not cond:
        problems.append(what)
for system in ["x86_64-linux", "aarch64-linux", "riscv64-linux"]:
    want({"default", "vipproxy"} <= set(out["packages"][system]), f"packages.{system}")
    want("package" in out["checks"][system], f"checks.{system}.package")
    pkgs = out["packages"][system]
    want(pkgs["vipproxy"]["subPackages"] == ["cmd/vipproxy"], f"packages.{system}.vipproxy: vipproxy alone")
    want(pkgs.get("vipproxy-apiserver", {}).get("subPackages") == ["cmd/vipproxy-apiserver"], f"packages.{system}.vipproxy-apiserver: the stand-in alone")
for system in ["x86_64-linux", "aarch64-linux"]:
    want({"vm-scenario", "vm-smoke", "vm-nixos-module"} <= set(out["checks"][system]), f"VM tests in checks.{system}")
want(set(out["checks"]["riscv64-linux"]) == {"package"}, "riscv64 checks: the package only")
want("package-riscv64" in out["checks"]["x86_64-linux"], "cross-compiled riscv64 package in checks")
want("vm-scenario" in out["riscv64VmTests"], "riscv64 VM tests in legacyPackages")
want(out["overlay"] == ["vipproxy"] and out["nixosModule"], "overlay and module")
for p in problems:
    print("flake: FAIL:", p, file=sys.stderr)
n = sum(len(v) for v in out["checks"].values())
print(f"flake: outputs evaluate against a stub nixpkgs ({n} checks)")
sys.exit(1 if problems else 0)'
}

# The vendorHash as buildGoModule computes it: its goModules derivation runs
# `go mod vendor` in the package source and takes the NAR hash of vendor/.
vendor_hash() {
	local src="$scratch/src"
	mkdir -p "$src"
	# The work tree (tracked and new files) within nix/package.nix's src
	# fileset: the source once committed, as the Nix build sees it.
	local f paths
	paths=$(fileset_paths)
	# shellcheck disable=SC2086 # one argument per path
	git ls-files --cached --others --exclude-standard -- $paths | while IFS= read -r f; do
		if [ -f "$f" ]; then cp --parents -t "$src" -- "$f"; fi
	done
	(cd "$src" && env -u GOFLAGS GO111MODULE=on go mod vendor)
	nix hash path --type sha256 "$src/vendor"
}

# The paths in nix/package.nix's src fileset (`../x` and
# `(lib.fileset.maybeMissing ../x)`), relative to the repository.
fileset_paths() {
	sed -n '/fileset = lib.fileset.unions \[/,/\];/s|^ *(\{0,1\}\(lib.fileset.maybeMissing \)\{0,1\}\.\./\([^)]*\))\{0,1\}$|\2|p' nix/package.nix
}

# Every top-level directory the packaged commands import is in the source
# fileset of nix/package.nix (else the Nix build cannot find the package).
check_fileset() {
	local mod subs dirs d missing=""
	mod=$(go list -m)
	subs=$(sed -n '/subPackages = \[/,/\];/s/^ *"\(.*\)"$/.\/\1/p' nix/package.nix)
	# shellcheck disable=SC2086 # one argument per package
	dirs=$(go list -deps $subs | sed -n "s|^$mod/\([^/]*\).*|\1|p" | sort -u)
	for d in $dirs; do
		grep -Eq "^ *(\(lib.fileset.maybeMissing )?\.\./$d\)?$" nix/package.nix || missing="$missing $d"
	done
	if [ -n "$missing" ]; then
		echo "fileset: FAIL: nix/package.nix's src leaves out$missing, which $(echo $subs) import" >&2
		return 1
	fi
	echo "fileset: nix/package.nix's src holds every directory $(echo $subs) import ($(echo $dirs))"
}

check_vendor_hash() {
	local want have
	want=$(vendor_hash)
	have=$(sed -n 's/^ *vendorHash = "\(.*\)";/\1/p' nix/package.nix)
	if [ "${1:-}" = --write ]; then
		sed -i "s|^\( *vendorHash = \)\".*\";|\1\"$want\";|" nix/package.nix
		echo "vendor-hash: nix/package.nix vendorHash = $want"
	elif [ "$have" != "$want" ]; then
		echo "vendor-hash: FAIL: nix/package.nix has vendorHash $have but go mod vendor gives $want;" \
			"run: make nix-vendor-hash" >&2
		return 1
	else
		echo "vendor-hash: $have is current"
	fi
}

case "${1:-}" in
parse) check_parse ;;
lib) check_lib ;;
module) check_module ;;
agree) check_agree "$2" ;;
units) check_units ;;
flake) check_flake ;;
pyflakes) check_pyflakes ;;
vendor-hash) check_vendor_hash "${2:-}" ;;
fileset) check_fileset ;;
nixos) check_nixos ;;
all)
	check_parse
	check_lib
	check_module
	check_nixos
	check_agree "$2"
	check_units
	check_flake
	check_pyflakes
	check_fileset
	check_vendor_hash
	;;
*)
	sed -n '2,15p' "$0" >&2
	exit 2
	;;
esac

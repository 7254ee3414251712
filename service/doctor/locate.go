package doctor

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Install is what runs on this node, as systemd and the running keepalived
// tell it, never assumed from one distribution's paths: whether the units
// come from the Nix store (services.vipproxy wrote them, and the networkd
// files, sysctls and keepalived.conf too), and which file keepalived reads.
type Install struct {
	// NixOS: vipproxy.socket's unit file resolves into /nix/store (or,
	// where systemd does not know the unit, /etc/NIXOS exists). Decides
	// which files doctor compares and how each fix is worded.
	NixOS bool
	// SocketUnit is vipproxy.socket's unit file (FragmentPath), "" if unknown.
	SocketUnit string
	// KeepalivedConf is the file keepalived reads: -f/--use-file of the
	// running keepalived, else of keepalived.service's ExecStart, else
	// keepalived's default. KeepalivedFrom says which.
	KeepalivedConf string
	KeepalivedFrom string
	// KeepalivedConfigID is the config id (-i, --config-id) of that
	// keepalived, which decides its conditional lines (@id); "" for
	// keepalived's default, the host name up to its first dot.
	KeepalivedConfigID string
}

// DefaultKeepalivedConf is where keepalived reads its config without -f.
const DefaultKeepalivedConf = "/etc/keepalived/keepalived.conf"

// Locate asks systemd and /proc what runs on this node.
func Locate(ctx context.Context, h Host) Install {
	var in Install
	in.SocketUnit = systemdProperty(ctx, h, "vipproxy.socket", "FragmentPath")
	if in.SocketUnit != "" {
		in.NixOS = inNixStore(filepath.Join(h.Root, in.SocketUnit))
	} else {
		_, err := os.Stat(filepath.Join(h.Root, "etc/NIXOS"))
		in.NixOS = err == nil
	}
	in.KeepalivedConf, in.KeepalivedFrom, in.KeepalivedConfigID = keepalivedConf(ctx, h)
	return in
}

// inNixStore: path, with its symlinks followed (NixOS links
// /etc/systemd/system/X to the store), lies in /nix/store.
func inNixStore(path string) bool {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	return strings.Contains(path, "/nix/store/")
}

// keepalivedConf: the -f of the keepalived that runs, then of the one
// keepalived.service would start, then keepalived's default; and the
// config id (-i) the same keepalived reads its conditional lines with.
func keepalivedConf(ctx context.Context, h Host) (path, from, id string) {
	args, pid := keepalivedArgs(ctx, h)
	id = keepalivedOption(args, 'i', "config-id")
	file := keepalivedOption(args, 'f', "use-file")
	switch {
	case h.KeepalivedConf != "":
		return h.KeepalivedConf, "--keepalived-conf", id
	case file != "" && pid > 0:
		return file, "the running keepalived (pid " + strconv.Itoa(pid) + ")", id
	case file != "":
		return file, "keepalived.service's ExecStart", id
	case pid > 0:
		return DefaultKeepalivedConf, "the running keepalived's default (pid " + strconv.Itoa(pid) + ", no -f)", id
	}
	return DefaultKeepalivedConf, "keepalived's default", id
}

// keepalivedArgs: the arguments of the keepalived that runs (its pid),
// else of the one keepalived.service would start (pid 0).
func keepalivedArgs(ctx context.Context, h Host) ([]string, int) {
	if pid, _ := strconv.Atoi(systemdProperty(ctx, h, "keepalived.service", "MainPID")); pid > 0 {
		if raw, err := os.ReadFile(filepath.Join(h.Proc, strconv.Itoa(pid), "cmdline")); err == nil {
			return strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00"), pid
		}
	}
	return execArgv(systemdProperty(ctx, h, "keepalived.service", "ExecStart")), 0
}

// keepalivedArgOptions are keepalived 2.2.7's short options that take an
// argument (its getopt_long string, keepalived/core/main.c).
const keepalivedArgOptions = "uSfpisrcbA"

// keepalivedOption is the value keepalived's arguments give the option
// short/long, read as getopt_long reads them: -f FILE, -fFILE, -Df FILE
// (clustered), --use-file FILE, --use-file=FILE; the last one wins, "--"
// ends the options. "" for none.
func keepalivedOption(args []string, short byte, long string) string {
	value := ""
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if name, rest, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); strings.HasPrefix(a, "--") {
			switch {
			case name != long:
			case ok:
				value = rest
			case i+1 < len(args):
				value, i = args[i+1], i+1
			}
			continue
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		for j := 1; j < len(a); j++ {
			if !strings.ContainsRune(keepalivedArgOptions, rune(a[j])) {
				continue
			}
			arg := a[j+1:]
			if arg == "" && i+1 < len(args) {
				arg, i = args[i+1], i+1
			}
			if a[j] == short {
				value = arg
			}
			break
		}
	}
	return value
}

// execArgv takes the argv[] of systemctl show's ExecStart=
// ("{ path=... ; argv[]=/usr/sbin/keepalived -f X ; ignore_errors=no ; ... }").
func execArgv(exec string) []string {
	_, rest, ok := strings.Cut(exec, "argv[]=")
	if !ok {
		return nil
	}
	argv, _, _ := strings.Cut(rest, " ;")
	return strings.Fields(argv)
}

// systemdProperty is `systemctl show -p NAME --value UNIT`, "" where there
// is no systemd or the unit is not loaded.
func systemdProperty(ctx context.Context, h Host, unit, name string) string {
	if h.Systemctl == nil {
		return ""
	}
	out, err := h.Systemctl(ctx, "show", "-p", name, "--value", unit)
	if err != nil {
		return ""
	}
	v := strings.TrimSpace(out)
	if name == "MainPID" && v == "0" {
		return ""
	}
	return v
}

// systemdListens is what a socket unit listens on (systemctl show's
// Listen=, one "ADDR (Stream)" each), without the kind.
func systemdListens(ctx context.Context, h Host, unit string) []string {
	if h.Systemctl == nil {
		return nil
	}
	out, err := h.Systemctl(ctx, "show", "-p", "Listen", unit)
	if err != nil {
		return nil
	}
	var ls []string
	for line := range strings.SplitSeq(out, "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "Listen=")
		if !ok || v == "" {
			continue
		}
		addr, _, _ := strings.Cut(v, " (")
		ls = append(ls, addr)
	}
	return ls
}

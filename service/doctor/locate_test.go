package doctor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/keepalived"
)

// fakeSystemd answers `systemctl show -p NAME --value UNIT` from props
// ("UNIT NAME" -> value), `show -p Listen UNIT` from listens and
// `is-active` with active.
func fakeSystemd(props map[string]string, listens []string) func(context.Context, ...string) (string, error) {
	return func(_ context.Context, args ...string) (string, error) {
		switch {
		case len(args) == 5 && args[0] == "show" && args[3] == "--value":
			return props[args[4]+" "+args[2]] + "\n", nil
		case len(args) == 4 && args[0] == "show" && args[2] == "Listen":
			var b strings.Builder
			for _, l := range listens {
				fmt.Fprintf(&b, "Listen=%s (Stream)\n", l)
			}
			return b.String(), nil
		case len(args) == 2 && args[0] == "is-active":
			return "active\n", nil
		}
		return "", fmt.Errorf("unexpected systemctl %q", args)
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A NixOS node: vipproxy.socket is /etc/systemd/system/vipproxy.socket, a
// link into the store, and keepalived runs with -f on a store file (as
// nixpkgs' keepalived module starts it): both found, no Debian path used.
func TestLocateNixOS(t *testing.T) {
	root, proc := t.TempDir(), t.TempDir()
	store := filepath.Join(root, "nix/store/0000-unit-vipproxy.socket/vipproxy.socket")
	write(t, store, "[Socket]\n")
	unit := filepath.Join(root, "etc/systemd/system/vipproxy.socket")
	os.MkdirAll(filepath.Dir(unit), 0o755)
	if err := os.Symlink(store, unit); err != nil {
		t.Fatal(err)
	}
	conf := "/nix/store/1111-keepalived.conf"
	write(t, filepath.Join(proc, "4242/cmdline"), "/nix/store/2222-keepalived/bin/keepalived\x00-f\x00"+conf+"\x00-p\x00/run/keepalived.pid\x00")
	h := Host{Root: root, Proc: proc, Systemctl: fakeSystemd(map[string]string{
		"vipproxy.socket FragmentPath": "/etc/systemd/system/vipproxy.socket",
		"keepalived.service MainPID":   "4242",
	}, nil)}
	in := Locate(t.Context(), h)
	if !in.NixOS || in.KeepalivedConf != conf || !strings.Contains(in.KeepalivedFrom, "pid 4242") {
		t.Errorf("Locate on a NixOS node = %+v", in)
	}
}

// A Debian node: the packaged unit, keepalived stopped, its ExecStart
// without -f: keepalived's default file.
func TestLocateDebian(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "lib/systemd/system/vipproxy.socket"), "[Socket]\n")
	h := Host{Root: root, Proc: t.TempDir(), Systemctl: fakeSystemd(map[string]string{
		"vipproxy.socket FragmentPath": "/lib/systemd/system/vipproxy.socket",
		"keepalived.service MainPID":   "0",
		"keepalived.service ExecStart": "{ path=/usr/sbin/keepalived ; argv[]=/usr/sbin/keepalived --dont-fork $DAEMON_ARGS ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }",
	}, nil)}
	in := Locate(t.Context(), h)
	if in.NixOS || in.KeepalivedConf != DefaultKeepalivedConf || in.KeepalivedFrom != "keepalived's default" {
		t.Errorf("Locate on a Debian node = %+v", in)
	}
	// Stopped keepalived whose unit names its file: that file.
	h.Systemctl = fakeSystemd(map[string]string{
		"keepalived.service ExecStart": "{ path=/usr/sbin/keepalived ; argv[]=/usr/sbin/keepalived --dont-fork --use-file=/srv/k.conf ; ignore_errors=no }",
	}, nil)
	if in := Locate(t.Context(), h); in.KeepalivedConf != "/srv/k.conf" {
		t.Errorf("keepalived.service with --use-file: %+v", in)
	}
}

func TestKeepalivedOption(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		file, id string
	}{
		{[]string{"keepalived", "-f", "/a"}, "/a", ""},
		{[]string{"keepalived", "-f/b", "--dont-fork"}, "/b", ""},
		{[]string{"keepalived", "--use-file", "/c"}, "/c", ""},
		{[]string{"keepalived", "--use-file=/d", "-f", "/e"}, "/e", ""},
		{[]string{"keepalived", "--dont-fork", "-D"}, "", ""},
		{[]string{"keepalived", "-Df", "/f", "-i", "main"}, "/f", "main"},
		{[]string{"keepalived", "-lDfi", "/g"}, "i", ""}, // getopt: the rest of the cluster is -f's argument
		{[]string{"keepalived", "-p", "-f", "--config-id=backup"}, "", "backup"},
		{[]string{"keepalived", "-imain", "--config-id", "other", "--", "-f", "/h"}, "", "other"},
	} {
		if file, id := keepalivedOption(tc.args, 'f', "use-file"), keepalivedOption(tc.args, 'i', "config-id"); file != tc.file || id != tc.id {
			t.Errorf("%q: file %q, id %q; want %q, %q", tc.args, file, id, tc.file, tc.id)
		}
	}
}

func nixosConfig(t *testing.T) *config.Valid {
	t.Helper()
	cfg, err := config.Parse("vipproxy.toml", []byte(testutil.NodeConfig([]string{"192.0.2.10", "2001:db8::10"}, "192.0.2.11:6443", []string{"eth1"}, "")))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// doctor on a NixOS node: the keepalived.conf the running keepalived reads
// and the socket's listeners, as systemd reports them, pass when right and
// fail with fixes in the system configuration (never a file under /etc to
// write, a vipproxy command that writes one, or vipproxy-network).
func TestDoctorNixOSWording(t *testing.T) {
	cfg := nixosConfig(t)
	conf := filepath.Join(t.TempDir(), "0000-keepalived.conf")
	write(t, conf, string(keepalived.Render(cfg)))
	listens := []string{"192.0.2.10:6443", "[2001:db8::10]:6443"}
	h := Host{Root: t.TempDir(), Systemctl: fakeSystemd(nil, listens),
		Install: &Install{NixOS: true, SocketUnit: "/etc/systemd/system/vipproxy.socket", KeepalivedConf: conf, KeepalivedFrom: "the running keepalived (pid 1)"}}
	rs, err := Run(t.Context(), h, cfg, []string{"drop-ins", "keepalived"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Status != Pass {
			t.Errorf("healthy NixOS node: %+v", r)
		}
	}

	write(t, conf, "vrrp_instance other {\n  interface eth1\n}\n")
	h.Systemctl = fakeSystemd(nil, listens[:1])
	rs, _ = Run(t.Context(), h, cfg, []string{"drop-ins", "keepalived"})
	want := map[string]string{"drop-ins": "nixos-rebuild switch", "keepalived": "services.vipproxy.keepalived.enable"}
	for _, r := range rs {
		if r.Status != Fail || !strings.Contains(r.Fix, want[r.Check]) {
			t.Errorf("broken NixOS node: %+v, want FAIL with a fix naming %q", r, want[r.Check])
		}
		for _, debian := range []string{"/etc/keepalived", "vipproxy keepalived write", "vipproxy units write", "vipproxy-network"} {
			// The cause too: a fix written into it (as keepalived's
			// check once did) reaches the operator all the same.
			if strings.Contains(r.Fix, debian) || strings.Contains(r.Detail, debian) {
				t.Errorf("NixOS result for %s names %q: %s / fix: %s", r.Check, debian, r.Detail, r.Fix)
			}
		}
	}
	if !slices.ContainsFunc(rs, func(r Result) bool { return strings.Contains(r.Detail, "listens on [192.0.2.10:6443]") }) {
		t.Errorf("the socket's listeners are not named: %+v", rs)
	}
}

// Every fix has a NixOS wording, and none of them sends the operator to
// the files or commands of the Debian install.
func TestNixOSFixesNameNoDebianPath(t *testing.T) {
	f := nixosFixes
	for i, fix := range []string{f.network, f.arp, f.socket, f.keepalivedConf, f.trackProbe, f.virtualServer, f.otherInstance, f.strict, f.keepalivedUnit, f.twoHolders} {
		if fix == "" || !strings.Contains(fix, "services.") && !strings.Contains(fix, "systemctl") {
			t.Errorf("NixOS fix %d is empty or names no option or unit: %q", i, fix)
		}
		for _, debian := range []string{"/etc/keepalived", "vipproxy network apply", "vipproxy units write", "vipproxy-network", "conf.d"} {
			if strings.Contains(fix, debian) {
				t.Errorf("NixOS fix %d names %q: %s", i, debian, fix)
			}
		}
	}
}

// A keepalived.conf that would cut the VIP off fails the keepalived
// check, with each install's fix: a vrrp_instance left from an earlier
// setup that still lists the VIP, and vrrp_strict (keepalived's sample
// config has it).
func TestDoctorFindsKeepalivedCuttingTheVIP(t *testing.T) {
	cfg := nixosConfig(t)
	rendered := string(keepalived.Render(cfg))
	for _, c := range []struct {
		conf, detail string
		fix          map[bool]string // by NixOS
	}{
		{rendered + "vrrp_instance VI_1 {\n  virtual_router_id 51\n  virtual_ipaddress {\n    192.0.2.10/24 dev eth1\n  }\n}\n",
			"vrrp_instance VI_1 also holds the VIP 192.0.2.10", map[bool]string{false: "systemctl reload keepalived", true: "services.keepalived.vrrpInstances"}},
		{"global_defs {\n  vrrp_strict\n}\n" + rendered,
			"vrrp_strict in global_defs", map[bool]string{false: "systemctl restart keepalived", true: "services.keepalived.extraGlobalDefs"}},
	} {
		for _, nixos := range []bool{false, true} {
			conf := filepath.Join(t.TempDir(), "keepalived.conf")
			write(t, conf, c.conf)
			h := Host{Root: t.TempDir(), Install: &Install{NixOS: nixos, KeepalivedConf: conf, KeepalivedFrom: "keepalived's default"}}
			rs, err := Run(t.Context(), h, cfg, []string{"keepalived"})
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 1 || rs[0].Status != Fail || !strings.Contains(rs[0].Detail, c.detail) || !strings.Contains(rs[0].Fix, c.fix[nixos]) {
				t.Errorf("NixOS %v: %+v, want FAIL naming %q with a fix naming %q", nixos, rs, c.detail, c.fix[nixos])
			}
		}
	}
}

// The running keepalived's config id (-i) decides its conditional lines:
// doctor reads them with it, here a vrrp_strict meant for node "main"
// only.
func TestDoctorReadsKeepalivedWithItsConfigID(t *testing.T) {
	cfg := nixosConfig(t)
	conf := filepath.Join(t.TempDir(), "keepalived.conf")
	write(t, conf, "global_defs {\n  @main vrrp_strict\n}\n"+string(keepalived.Render(cfg)))
	for id, strict := range map[string]bool{"main": true, "backup": false} {
		proc := t.TempDir()
		write(t, filepath.Join(proc, "4242/cmdline"), "/usr/sbin/keepalived\x00--dont-fork\x00-i\x00"+id+"\x00-f\x00"+conf+"\x00")
		h := Host{Root: t.TempDir(), Proc: proc, Systemctl: fakeSystemd(map[string]string{"keepalived.service MainPID": "4242"}, nil)}
		rs, err := Run(t.Context(), h, cfg, []string{"keepalived"})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || (rs[0].Status == Fail && strings.Contains(rs[0].Detail, "vrrp_strict")) != strict {
			t.Errorf("keepalived -i %s: %+v, want vrrp_strict found %v", id, rs, strict)
		}
	}
}

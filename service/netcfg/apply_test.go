package netcfg

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil/testconfig"
	"github.com/vipproxy/vipproxy/service/atomicfile"
	"github.com/vipproxy/vipproxy/service/config"
)

// fakeNetworkd counts reloads and, like networkd, configures the link on
// reload (on a veth stand-in, since this kernel has no dummy module).
type fakeNetworkd struct {
	host     *Host
	cfg      *config.Valid
	reloads  int
	restarts int
	down     bool
}

func (f *fakeNetworkd) Running(context.Context) error {
	if f.down {
		return ErrNetworkdDown
	}
	return nil
}

func (f *fakeNetworkd) Reload(context.Context) error {
	f.reloads++
	return f.host.ensureLink(f.cfg)
}

func (f *fakeNetworkd) Restart(context.Context) error {
	f.restarts++
	return f.host.ensureLink(f.cfg)
}

// hostIn sets up a namespace with uplink up0 and a stand-in VIP link.
func hostIn(t *testing.T, cfg *config.Valid) (*testNS, *Host, *fakeNetworkd) {
	n := newTestNS(t)
	n.veth(t, "up0", "up0-peer")
	n.veth(t, cfg.Network.Interface, "vip-peer")
	h := &Host{Netlink: n.nl, Sysctl: n.sysctl()}
	fake := &fakeNetworkd{host: h, cfg: cfg}
	h.Reloader = fake
	return n, h, fake
}

func testConfig(t *testing.T) *config.Valid {
	return testconfig.WithBackend(t, "192.0.2.1:6443", `[vip]`, `addresses = ["10.0.0.100", "2001:db8:1::100"]`, `[network]`, `uplinks = ["up0"]`)
}

func TestApplyIsIdempotent(t *testing.T) {
	cfg := testConfig(t)
	n, h, fake := hostIn(t, cfg)
	root := t.TempDir()
	ctx := context.Background()
	opts := Options{Root: root, Wait: 5 * time.Second}

	first, err := h.Apply(ctx, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	// Four files (networkd runs for vipproxy alone here: its
	// networkd.conf.d drop-in too), and a restart, which reads it.
	if len(first.Changed) != 4 || !first.Restarted || fake.restarts != 1 || fake.reloads != 0 || len(first.Problems) != 0 {
		t.Fatalf("first apply: %+v, restarts %d, reloads %d; want 4 files, one restart, no problems", first, fake.restarts, fake.reloads)
	}
	wantSysctls := []string{"net.ipv4.conf.up0.arp_ignore=1", "net.ipv4.conf.up0.arp_announce=2"}
	if !slices.Equal(first.Sysctls, wantSysctls) {
		t.Errorf("sysctls set: %v, want %v", first.Sysctls, wantSysctls)
	}
	stamps := modTimes(t, first.Changed)

	second, err := h.Apply(ctx, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Changed) != 0 || second.Reloaded || second.Restarted || fake.reloads+fake.restarts != 1 || len(second.Sysctls) != 0 || len(second.Problems) != 0 {
		t.Fatalf("second apply: %+v, reloads %d; want nothing written, no reload", second, fake.reloads)
	}
	if after := modTimes(t, first.Changed); !slices.Equal(stamps, after) {
		t.Errorf("files were rewritten: mtimes %v -> %v", stamps, after)
	}

	// The VIP removed by hand: files unchanged, yet one reload repairs it.
	n.ip(t, "addr", "del", "10.0.0.100/32", "dev", "dummyvip0")
	third, err := h.Apply(ctx, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(third.Changed) != 0 || !third.Reloaded || fake.reloads != 1 || len(third.Problems) != 0 {
		t.Fatalf("apply after the VIP was removed: %+v, reloads %d; want no file written, one repair reload", third, fake.reloads)
	}
}

func modTimes(t *testing.T, paths []string) []time.Time {
	var out []time.Time
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, st.ModTime())
	}
	return out
}

// TestApplyFailureLeavesOldFiles makes the second file's write fail: the
// first file, already replaced, gets its old bytes back, the third is never
// touched, and networkd is not reloaded.
func TestApplyFailureLeavesOldFiles(t *testing.T) {
	cfg := testConfig(t)
	_, h, fake := hostIn(t, cfg)
	root := t.TempDir()
	files := Render(cfg, root)
	old := map[string][]byte{}
	for i, f := range files.List() {
		old[f.Path] = []byte("# old content " + string(rune('a'+i)) + "\n")
		if err := os.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.Path, old[f.Path], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writes := 0
	h.Write = func(path string, data []byte, perm fs.FileMode) error {
		if writes++; writes == 2 {
			return errors.New("injected: disk full")
		}
		return atomicfile.Write(path, data, perm)
	}
	_, err := h.Apply(context.Background(), cfg, Options{Root: root})
	if err == nil || !strings.Contains(err.Error(), "injected: disk full") || !strings.Contains(err.Error(), "restored") {
		t.Fatalf("apply: %v, want the injected error and a note that files were restored", err)
	}
	for path, want := range old {
		got, err := os.ReadFile(path)
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: got %q (%v), want the old %q", path, got, err, want)
		}
	}
	if fake.reloads != 0 {
		t.Errorf("networkd reloaded %d times after a failed write", fake.reloads)
	}
	if v, _ := h.Sysctl.Get("up0", "arp_ignore"); v != 0 {
		t.Errorf("arp_ignore on up0 set to %d although apply failed before it", v)
	}
}

// TestApplyFailureRemovesNewFiles: with no old files, a failure leaves none.
func TestApplyFailureRemovesNewFiles(t *testing.T) {
	cfg := testConfig(t)
	_, h, _ := hostIn(t, cfg)
	root := t.TempDir()
	writes := 0
	h.Write = func(path string, data []byte, perm fs.FileMode) error {
		if writes++; writes == 3 {
			return errors.New("injected")
		}
		return atomicfile.Write(path, data, perm)
	}
	if _, err := h.Apply(context.Background(), cfg, Options{Root: root}); err == nil {
		t.Fatal("apply succeeded despite a failing write")
	}
	var left []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, p)
		}
		return nil
	})
	if len(left) != 0 {
		t.Errorf("files left behind: %v", left)
	}
}

func TestApplyRejectsBadInputBeforeWriting(t *testing.T) {
	cfg := testConfig(t)
	n, h, fake := hostIn(t, cfg)
	n.veth(t, "other0", "other0-peer")
	n.ip(t, "addr", "add", "10.0.0.100/32", "dev", "other0")
	n.ip(t, "addr", "add", "10.0.0.100/32", "dev", "up0") // keepalived's copy on the master: allowed
	unknown := testConfig(t)
	unknown.Network.Uplinks = []string{"up0", "eth9"}

	cases := []struct {
		name string
		cfg  *config.Valid
		opts Options
		want string
	}{
		{"unknown uplink", unknown, Options{}, "network.uplinks[1]: uplink eth9 does not exist"},
		{"VIP on another interface", cfg, Options{}, "vip.addresses[0]: 10.0.0.100 is already on interface other0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			c.opts.Root = root
			_, err := h.Apply(context.Background(), c.cfg, c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("apply: %v, want an error containing %q", err, c.want)
			}
			if entries, _ := os.ReadDir(root); len(entries) != 0 {
				t.Errorf("apply wrote %d entries under the root before failing", len(entries))
			}
		})
	}
	n.ip(t, "addr", "del", "10.0.0.100/32", "dev", "other0")
	fake.down = true
	_, err := h.Apply(context.Background(), cfg, Options{Root: t.TempDir()})
	if !errors.Is(err, ErrNetworkdDown) {
		t.Fatalf("apply with networkd down: %v, want ErrNetworkdDown", err)
	}
	res, err := h.Apply(context.Background(), cfg, Options{Root: t.TempDir(), Netlink: true})
	if err != nil || len(res.Problems) != 0 {
		t.Fatalf("apply --netlink with the VIP also on the uplink: %+v, %v; want success", res, err)
	}
}

// TestApplyNetlinkCreatesDummy: where the kernel has the dummy module (the
// VMs), apply --netlink creates the link, without IPv6 link-local, and it
// verifies; where it has none (this host), the error says what is missing.
func TestApplyNetlinkCreatesDummy(t *testing.T) {
	cfg := testConfig(t)
	n := newTestNS(t)
	n.veth(t, "up0", "up0-peer")
	h := Host{Netlink: n.nl, Sysctl: n.sysctl()}
	root := t.TempDir()
	res, err := h.Apply(context.Background(), cfg, Options{Root: root, Netlink: true, Wait: 5 * time.Second})
	if err != nil {
		if !strings.Contains(err.Error(), "create dummy link dummyvip0") || !strings.Contains(err.Error(), "dummy kernel module") {
			t.Fatalf("apply --netlink without the dummy module: %v, want an error naming the link and the module", err)
		}
		for _, f := range []string{"etc/systemd/network/60-vipproxy.netdev", "etc/sysctl.d/60-vipproxy.conf"} {
			if _, serr := os.Stat(filepath.Join(root, f)); !os.IsNotExist(serr) {
				t.Errorf("failed apply left %s behind (%v)", f, serr)
			}
		}
		t.Skipf("no dummy module in this kernel; the error was clear: %v", err)
	}
	if len(res.Problems) != 0 {
		t.Fatalf("problems after creating the dummy: %q", res.Problems)
	}
	link, _ := n.nl.LinkByName("dummyvip0")
	have, _ := linkAddrs(n.nl, link)
	for a := range have {
		if a.IsLinkLocalUnicast() {
			t.Errorf("created dummy has link-local %s", a)
		}
	}
	if rm, err := h.Remove(context.Background(), cfg, Options{Netlink: true, Root: t.TempDir()}); err != nil || !rm.LinkDeleted {
		t.Errorf("remove: %+v, %v; want the dummy deleted", rm, err)
	}
}

// TestApplyKeepsNeighboursRules: where networkd runs for vipproxy alone,
// apply writes the networkd.conf.d drop-in that stops networkd from
// deleting a CNI's rules and routes, and restarts networkd once so that it
// reads it; the files of the operator's own networkd setup leave
// networkd.conf to them (a note says what to set), with a plain reload.
// remove deletes the drop-in with the other files.
func TestApplyKeepsNeighboursRules(t *testing.T) {
	needRuleDump(t)
	cfg := testConfig(t)
	_, h, fake := hostIn(t, cfg)
	root := t.TempDir()
	ctx := context.Background()
	res, err := h.Apply(ctx, cfg, Options{Root: root, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(root, "etc/systemd/networkd.conf.d/60-vipproxy.conf")
	data, err := os.ReadFile(conf)
	if err != nil {
		t.Fatalf("no networkd.conf.d drop-in: %v (wrote %v)", err, res.Changed)
	}
	for _, want := range []string{"[Network]\n", "ManageForeignRoutingPolicyRules=no\n", "ManageForeignRoutes=no\n"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("%s lacks %q:\n%s", conf, want, data)
		}
	}
	if !res.Restarted || fake.restarts != 1 || fake.reloads != 0 || len(res.Notes) != 0 {
		t.Errorf("apply: %+v, restarts %d, reloads %d; want one restart (networkd.conf is read at start) and no note", res, fake.restarts, fake.reloads)
	}
	rm, err := h.Remove(ctx, cfg, Options{Root: root})
	if err != nil || !slices.Contains(rm.Removed, conf) {
		t.Errorf("remove: %+v, %v; want %s removed", rm, err, conf)
	}

	// The operator's networkd manages eth0: networkd.conf is theirs.
	own := t.TempDir()
	if err := os.MkdirAll(filepath.Join(own, "etc/systemd/network"), 0o755); err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(own, "etc/systemd/network/10-eth0.network")
	if err := os.WriteFile(mine, []byte("[Match]\nName=eth0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = h.Apply(ctx, cfg, Options{Root: own, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(own, "etc/systemd/networkd.conf.d/60-vipproxy.conf")); !os.IsNotExist(err) {
		t.Errorf("drop-in written beside the operator's %s (%v)", mine, err)
	}
	if len(res.Changed) != 3 || res.Restarted || len(res.Notes) != 1 ||
		!strings.Contains(res.Notes[0], mine) || !strings.Contains(res.Notes[0], "ManageForeignRoutingPolicyRules=no") {
		t.Errorf("apply beside the operator's networkd: %+v; want 3 files, no restart, a note naming %s and the setting", res, mine)
	}
}

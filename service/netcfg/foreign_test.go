package netcfg

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/internal/testutil/testconfig"
)

// netplanUplink is what netplan writes for a static uplink: the
// operator's networkd manages up0.
const netplanUplink = "[Match]\nName=up0\n\n[Network]\nAddress=192.0.2.11/24\nGateway=192.0.2.254\n\n[Route]\nDestination=10.50.0.0/16\nGateway=192.0.2.254\n"

// neighbours puts a CNI's and a routing daemon's state on the node: the
// rules and routes networkd deleted in the Debian 12 VM (networkd 252).
func neighbours(t *testing.T, n *testNS) {
	t.Helper()
	n.ip(t, "link", "set", "up0", "up")
	n.ip(t, "addr", "add", "192.0.2.11/24", "dev", "up0")
	for _, cmd := range [][]string{
		{"rule", "add", "fwmark", "0x200/0xf00", "pref", "9", "lookup", "2004"},
		{"route", "add", "10.244.1.0/24", "via", "192.0.2.3", "dev", "up0", "proto", "bird"},
		{"route", "add", "10.96.0.0/12", "via", "192.0.2.3", "dev", "up0", "proto", "static"},
		{"route", "add", "blackhole", "10.244.0.0/26", "proto", "bird"},
	} {
		n.ip(t, cmd...)
	}
}

var atRisk = []string{
	"ip rule 9: fwmark 0x200/0xf00 lookup 2004 proto unspec",
	"ip route 10.244.1.0/24 via 192.0.2.3 dev up0 table main proto bird",
	"ip route 10.96.0.0/12 via 192.0.2.3 dev up0 table main proto static",
	"ip route blackhole 10.244.0.0/26 table main proto bird",
}

// TestApplyRefusesWhereNetworkdWouldDeleteNeighbours: beside the
// operator's networkd (a netplan-style up0) at its defaults, apply names
// every rule and route networkd would delete and the fix, and writes and
// reloads nothing; with the fix's drop-in, or with
// network.allow_foreign_cleanup, it applies.
func TestApplyRefusesWhereNetworkdWouldDeleteNeighbours(t *testing.T) {
	needRuleDump(t)
	cfg := testConfig(t)
	n, h, fake := hostIn(t, cfg)
	neighbours(t, n)
	root := t.TempDir()
	netplan := testutil.WriteFile(t, root, "run/systemd/network/10-netplan-up0.network", netplanUplink)
	ctx := context.Background()
	opts := Options{Root: root, Wait: 5 * time.Second}

	res, err := h.Apply(ctx, cfg, opts)
	var fe *ForeignError
	if !errors.As(err, &fe) {
		t.Fatalf("apply beside networkd at its defaults: %+v, %v; want a refusal", res, err)
	}
	for _, want := range append(slices.Clone(atRisk), netplan, ForeignFixFile, "ManageForeignRoutes=no", "network.allow_foreign_cleanup", cfg.Path) {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not name %q:\n%v", want, err)
		}
	}
	if len(fe.AtRisk) != len(atRisk) {
		t.Errorf("at risk: %q, want exactly %q", fe.AtRisk, atRisk)
	}
	if fake.reloads+fake.restarts != 0 || len(res.Changed) != 0 {
		t.Errorf("refused, yet %d reloads, %d restarts, files %v", fake.reloads, fake.restarts, res.Changed)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/systemd/network", cfg.Network.NetworkFile)); !os.IsNotExist(err) {
		t.Errorf("refused, yet vipproxy's .network written (%v)", err)
	}

	// The fix the refusal names.
	fix := testutil.WriteFile(t, root, ForeignFixFile, "[Network]\n"+strings.Join(foreignSettingLines(), "\n")+"\n")
	if res, err = h.Apply(ctx, cfg, opts); err != nil || fake.reloads != 1 || len(res.Notes) != 0 {
		t.Fatalf("apply with %s: %+v, %v, %d reloads; want applied, one reload, no note", fix, res, err, fake.reloads)
	}
	if err := os.Remove(fix); err != nil {
		t.Fatal(err)
	}

	// Or the operator accepts the deletion.
	accept := testconfig.WithBackend(t, "192.0.2.1:6443", `[vip]`, `addresses = ["10.0.0.100", "2001:db8:1::100"]`, `[network]`, `uplinks = ["up0"]`, `allow_foreign_cleanup = true`)
	res, err = h.Apply(ctx, accept, opts)
	if err != nil || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "network.allow_foreign_cleanup = true: networkd deletes") || !strings.Contains(res.Notes[0], atRisk[0]) {
		t.Fatalf("apply with network.allow_foreign_cleanup: %+v, %v; want applied with a note naming what networkd deletes", res, err)
	}
}

// TestFindForeignSparesWhatIsNotForeign: the kernel's rules and routes,
// networkd's own (its Gateway= and [Route] destinations, DHCP), routes on
// links no .network file matches (a CNI's bridge), on an unmanaged link
// and on vipproxy's link are not at risk; each of the others is.
func TestFindForeignSparesWhatIsNotForeign(t *testing.T) {
	needRuleDump(t)
	cfg := testConfig(t)
	n, h, _ := hostIn(t, cfg)
	neighbours(t, n)
	for _, l := range []string{"cni0", "lxc0"} {
		n.ip(t, "link", "add", l, "type", "bridge")
		n.ip(t, "link", "set", l, "up")
	}
	n.ip(t, "link", "set", cfg.Network.Interface, "up")
	for _, cmd := range [][]string{
		{"route", "add", "default", "via", "192.0.2.254", "dev", "up0", "proto", "static"},
		{"route", "add", "10.50.0.0/16", "via", "192.0.2.254", "dev", "up0", "proto", "static"},
		{"route", "add", "10.60.0.0/16", "via", "192.0.2.254", "dev", "up0", "proto", "dhcp"},
		{"route", "add", "10.244.50.0/24", "dev", "cni0", "proto", "bird"},
		{"route", "add", "10.244.60.0/24", "dev", "lxc0", "proto", "bird"},
		{"route", "add", "10.244.70.0/24", "dev", cfg.Network.Interface, "proto", "bird"},
	} {
		n.ip(t, cmd...)
	}
	root := t.TempDir()
	testutil.WriteFile(t, root, "run/systemd/network/10-netplan-up0.network", netplanUplink)
	testutil.WriteFile(t, root, "etc/systemd/network/20-lxc.network", "[Match]\nName=lxc*\n\n[Link]\nUnmanaged=yes\n")
	f, err := FindForeign(h.Netlink, cfg, root)
	if err != nil {
		t.Fatal(err)
	}
	got, want := append(slices.Clone(f.Rules), f.Routes...), slices.Clone(atRisk)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) || !f.Policy.Rules || !f.Policy.Routes {
		t.Errorf("found %q (policy %+v), want exactly %q", got, f.Policy, atRisk)
	}
}

// TestFindForeignReadsDropIns: networkd merges NAME.network.d/*.conf from
// each of its directories into the .network file, so a Gateway= or a
// [Route] an operator keeps in a drop-in makes those routes networkd's own
// (a gateway in a drop-in was reported at risk, and apply refused, on a
// node whose default route networkd had set itself); a drop-in hidden by
// an empty one of the same name in /etc counts for nothing.
func TestFindForeignReadsDropIns(t *testing.T) {
	needRuleDump(t)
	cfg := testConfig(t)
	n, h, _ := hostIn(t, cfg)
	neighbours(t, n)
	for _, cmd := range [][]string{
		{"route", "add", "default", "via", "192.0.2.254", "dev", "up0", "proto", "static"},
		{"route", "add", "10.50.0.0/16", "via", "192.0.2.254", "dev", "up0", "proto", "static"},
		{"route", "add", "10.60.0.0/16", "via", "192.0.2.254", "dev", "up0", "proto", "static"},
	} {
		n.ip(t, cmd...)
	}
	root := t.TempDir()
	testutil.WriteFile(t, root, "run/systemd/network/10-up0.network", "[Match]\nName=up0\n\n[Network]\nAddress=192.0.2.11/24\n")
	testutil.WriteFile(t, root, "etc/systemd/network/10-up0.network.d/50-gateway.conf", "[Network]\nGateway=192.0.2.254\n")
	testutil.WriteFile(t, root, "usr/lib/systemd/network/10-up0.network.d/60-route.conf", "[Route]\nDestination=10.50.0.0/16\nGateway=192.0.2.254\n")
	testutil.WriteFile(t, root, "usr/lib/systemd/network/10-up0.network.d/70-masked.conf", "[Route]\nDestination=10.60.0.0/16\nGateway=192.0.2.254\n")
	testutil.WriteFile(t, root, "etc/systemd/network/10-up0.network.d/70-masked.conf", "")
	f, err := FindForeign(h.Netlink, cfg, root)
	if err != nil {
		t.Fatal(err)
	}
	got := append(slices.Clone(f.Rules), f.Routes...)
	want := append(slices.Clone(atRisk), "ip route 10.60.0.0/16 via 192.0.2.254 dev up0 table main proto static")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("found %q, want exactly %q", got, want)
	}
}

// TestReadForeignPolicyPrecedence: networkd.conf, then the drop-ins by
// name, /etc hiding /usr/lib's of the same name (an empty file masks
// it), the last setting winning, a value that is no boolean ignored.
func TestReadForeignPolicyPrecedence(t *testing.T) {
	root := t.TempDir()
	read := func() ForeignPolicy {
		t.Helper()
		p, err := ReadForeignPolicy(root)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := read(); !p.Rules || !p.Routes {
		t.Errorf("no file: %+v, want networkd's defaults (yes, yes)", p)
	}
	testutil.WriteFile(t, root, "etc/systemd/networkd.conf", "[Network]\n#ManageForeignRoutes=no\nManageForeignRoutes=no\n")
	testutil.WriteFile(t, root, "usr/lib/systemd/networkd.conf.d/10-cni.conf", "[Network]\nManageForeignRoutingPolicyRules=off\n")
	if p := read(); p.Rules || p.Routes {
		t.Errorf("networkd.conf and a /usr/lib drop-in at no: %+v", p)
	}
	testutil.WriteFile(t, root, "etc/systemd/networkd.conf.d/10-cni.conf", "")
	if p := read(); !p.Rules || p.Routes {
		t.Errorf("/usr/lib's drop-in masked by an empty one in /etc: %+v, want rules yes, routes no", p)
	}
	testutil.WriteFile(t, root, "run/systemd/networkd.conf.d/20-x.conf", "[Network]\nManageForeignRoutingPolicyRules=0\nManageForeignRoutes=maybe\n")
	testutil.WriteFile(t, root, "run/systemd/networkd.conf.d/90-y.conf", "[DHCPv4]\nManageForeignRoutes=yes\n[Network]\nManageForeignRoutes=true\n")
	p := read()
	if p.Rules || !p.Routes {
		t.Errorf("20-x (rules 0, routes maybe) then 90-y (routes true): %+v, want rules no, routes yes", p)
	}
	if len(p.Files) != 4 || !strings.HasSuffix(p.Files[0], "/etc/systemd/networkd.conf") || !strings.HasSuffix(p.Files[3], "90-y.conf") {
		t.Errorf("files read: %q", p.Files)
	}
}

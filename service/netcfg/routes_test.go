package netcfg

import (
	"encoding/json"
	"net/netip"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// needRuleDump skips a test that lists routing policy rules under
// qemu-user (make test-multiarch): it does not translate RTM_GETRULE and
// answers EOPNOTSUPP, which a real kernel of any architecture never does;
// the native run covers these tests.
func needRuleDump(t *testing.T) {
	t.Helper()
	if testutil.Emulated() {
		t.Skip("qemu-user does not translate routing policy rule dumps (RTM_GETRULE: EOPNOTSUPP)")
	}
}

// ipJSON is how many entries `ip -j <args>` lists in the namespace.
func (n *testNS) ipJSON(t *testing.T, args ...string) int {
	t.Helper()
	out, err := n.Exec("ip", append([]string{"-j"}, args...)...)
	if err != nil {
		t.Fatalf("ip -j %v: %v: %s", args, err, out)
	}
	var entries []map[string]any
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("ip -j %v: %v: %s", args, err, out)
	}
	return len(entries)
}

// TestRulesAsIPListsThem: the rules listed are those `ip rule` lists, with
// the protocol that tells a CNI's rule (none) from the kernel's own.
func TestRulesAsIPListsThem(t *testing.T) {
	needRuleDump(t)
	n := newTestNS(t)
	n.IP(t, "rule", "add", "fwmark", "0x200/0xf00", "lookup", "2004", "priority", "9")
	n.IP(t, "rule", "add", "from", "10.1.0.0/16", "lookup", "100", "protocol", "bird", "priority", "100")
	n.IP(t, "-6", "rule", "add", "to", "2001:db8::/32", "lookup", "200", "priority", "50")
	got, err := Rules(n.nl)
	if err != nil {
		t.Fatal(err)
	}
	if want := n.ipJSON(t, "-4", "rule", "show") + n.ipJSON(t, "-6", "rule", "show"); len(got) != want {
		t.Fatalf("%d rules, ip rule %d: %+v", len(got), want, got)
	}
	find := func(prio uint32) Rule {
		t.Helper()
		i := slices.IndexFunc(got, func(r Rule) bool { return r.Priority == prio })
		if i < 0 {
			t.Fatalf("no rule of priority %d: %+v", prio, got)
		}
		return got[i]
	}
	if cni := find(9); cni.Protocol != 0 || !cni.HasMark || cni.Mark != 0x200 || cni.Mask != 0xf00 || cni.Table != 2004 || cni.Family != unix.AF_INET {
		t.Errorf("the fwmark rule read as %+v", cni)
	}
	if r := find(100); r.Protocol != unix.RTPROT_BIRD || r.Src != netip.MustParsePrefix("10.1.0.0/16") || r.Table != 100 || r.HasMark {
		t.Errorf("the bird rule read as %+v", r)
	}
	if r := find(50); r.Family != unix.AF_INET6 || r.Dst != netip.MustParsePrefix("2001:db8::/32") || r.Table != 200 {
		t.Errorf("the IPv6 rule read as %+v", r)
	}
	if r := find(0); r.Protocol != unix.RTPROT_KERNEL || r.Table != unix.RT_TABLE_LOCAL {
		t.Errorf("the kernel's local rule read as %+v", r)
	}
}

// TestRoutesAsIPListsThem: routes of every table, with their protocol,
// destination and links (a multipath route's next hops too), are those
// `ip route show table all` lists.
func TestRoutesAsIPListsThem(t *testing.T) {
	n := newTestNS(t)
	n.IP(t, "link", "add", "vp-a", "type", "veth", "peer", "name", "vp-b")
	for _, l := range []string{"vp-a", "vp-b"} {
		n.IP(t, "link", "set", l, "up")
	}
	n.IP(t, "addr", "add", "192.0.2.1/24", "dev", "vp-a")
	n.IP(t, "addr", "add", "198.51.100.1/24", "dev", "vp-b")
	n.IP(t, "route", "add", "10.2.0.0/16", "via", "192.0.2.9", "dev", "vp-a", "proto", "bird")
	n.IP(t, "route", "add", "10.3.0.0/16", "dev", "vp-a", "table", "2004", "proto", "static")
	n.IP(t, "route", "add", "10.4.0.0/16", "nexthop", "via", "192.0.2.9", "dev", "vp-a", "nexthop", "via", "198.51.100.9", "dev", "vp-b")
	n.IP(t, "route", "add", "blackhole", "10.5.0.0/16")
	n.IP(t, "route", "add", "default", "via", "192.0.2.254", "dev", "vp-a", "proto", "static")
	got, err := Routes(n.nl)
	if err != nil {
		t.Fatal(err)
	}
	if want := n.ipJSON(t, "-4", "route", "show", "table", "all") + n.ipJSON(t, "-6", "route", "show", "table", "all"); len(got) != want {
		t.Fatalf("%d routes, ip route %d: %+v", len(got), want, got)
	}
	find := func(dst string, table uint32) Route {
		t.Helper()
		i := slices.IndexFunc(got, func(r Route) bool { return r.Dst == netip.MustParsePrefix(dst) && r.Table == table })
		if i < 0 {
			t.Fatalf("no route to %s in table %d: %+v", dst, table, got)
		}
		return got[i]
	}
	a, b := mustLinkIndex(t, n, "vp-a"), mustLinkIndex(t, n, "vp-b")
	bird := find("10.2.0.0/16", unix.RT_TABLE_MAIN)
	if bird.Protocol != unix.RTPROT_BIRD || !slices.Equal(bird.LinkIndexes, []int{a}) || bird.Gateway != netip.MustParseAddr("192.0.2.9") {
		t.Errorf("bird route read as %+v", bird)
	}
	if r := find("10.3.0.0/16", 2004); r.Protocol != unix.RTPROT_STATIC || !slices.Equal(r.LinkIndexes, []int{a}) {
		t.Errorf("table 2004 route read as %+v", r)
	}
	if r := find("10.4.0.0/16", unix.RT_TABLE_MAIN); !slices.Equal(r.LinkIndexes, []int{a, b}) || r.Protocol != unix.RTPROT_BOOT {
		t.Errorf("multipath route read as %+v", r)
	}
	if r := find("10.5.0.0/16", unix.RT_TABLE_MAIN); r.Type != unix.RTN_BLACKHOLE || len(r.LinkIndexes) != 0 {
		t.Errorf("blackhole route read as %+v", r)
	}
	if r := find("0.0.0.0/0", unix.RT_TABLE_MAIN); r.Family != unix.AF_INET || r.Gateway != netip.MustParseAddr("192.0.2.254") {
		t.Errorf("default route read as %+v", r)
	}
	if r := find("192.0.2.1/32", unix.RT_TABLE_LOCAL); r.Type != unix.RTN_LOCAL || r.Protocol != unix.RTPROT_KERNEL {
		t.Errorf("local route read as %+v", r)
	}
}

func mustLinkIndex(t *testing.T, n *testNS, name string) int {
	t.Helper()
	l, err := n.oracle.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Index
}

package rtnl

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// testNS is a private namespace with a handle of ours and one of the
// vishvananda/netlink library, the oracle our answers are checked against.
type testNS struct {
	*testutil.NetNS
	fd     int
	h      *Handle
	oracle *netlink.Handle
}

func newTestNS(t *testing.T) *testNS {
	t.Helper()
	base := testutil.NewNetNS(t, "rtnl")
	ns, err := netns.GetFromName(base.Name)
	if err != nil {
		t.Fatalf("open netns %s: %v", base.Name, err)
	}
	t.Cleanup(func() { ns.Close() })
	h, err := OpenAt(int(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	oracle, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatalf("oracle handle: %v", err)
	}
	t.Cleanup(oracle.Close)
	return &testNS{NetNS: base, fd: int(ns), h: h, oracle: oracle}
}

// asOracle is how the library describes a link: what ours must match.
func asOracle(l netlink.Link) Link {
	a := l.Attrs()
	up := a.Flags & (net.FlagUp | net.FlagRunning | net.FlagBroadcast | net.FlagLoopback | net.FlagPointToPoint | net.FlagMulticast)
	kind := l.Type()
	if kind == "device" { // the library's name for no kind
		kind = ""
	}
	return Link{Index: a.Index, Name: a.Name, Kind: kind, Flags: up, OperState: OperState(a.OperState)}
}

// TestLinksMatchTheLibrary: links by name, by index and listed are the
// library's, flags and operational state included, down and up.
func TestLinksMatchTheLibrary(t *testing.T) {
	n := newTestNS(t)
	n.IP(t, "link", "add", "vp-a", "type", "veth", "peer", "name", "vp-b")
	check := func(stage string) {
		t.Helper()
		want, err := n.oracle.LinkList()
		if err != nil {
			t.Fatal(err)
		}
		got, err := n.h.LinkList()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) || len(got) != 3 {
			t.Fatalf("%s: %d links listed, the library %d, want lo and the veth pair", stage, len(got), len(want))
		}
		for i, w := range want {
			if got[i] != asOracle(w) {
				t.Errorf("%s: listed %+v, the library %+v", stage, got[i], asOracle(w))
			}
			byName, err := n.h.LinkByName(w.Attrs().Name)
			if err != nil || byName != asOracle(w) {
				t.Errorf("%s: by name %+v (%v), the library %+v", stage, byName, err, asOracle(w))
			}
			byIndex, err := n.h.LinkByIndex(w.Attrs().Index)
			if err != nil || byIndex != asOracle(w) {
				t.Errorf("%s: by index %+v (%v), the library %+v", stage, byIndex, err, asOracle(w))
			}
		}
	}
	check("down")
	a, err := n.h.LinkByName("vp-a")
	if err != nil {
		t.Fatal(err)
	}
	if a.Flags&net.FlagUp != 0 {
		t.Fatalf("a new veth is up: %+v", a)
	}
	b, _ := n.h.LinkByName("vp-b")
	for _, l := range []Link{a, b} {
		if err := n.h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	// The operational state follows the carrier a moment later: compare
	// once the library sees both ends up.
	for i := 0; i < 100 && (mustOracleLink(t, n, "vp-a").Attrs().OperState != netlink.OperUp ||
		mustOracleLink(t, n, "vp-b").Attrs().OperState != netlink.OperUp); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	check("up")
	if a, _ = n.h.LinkByName("vp-a"); a.Flags&net.FlagUp == 0 || a.OperState != OperUp {
		t.Errorf("after LinkSetUp on both ends: %+v (%s), want up", a, a.OperState)
	}
}

// TestMissingLinkIsNotFound: a name or an index that no link has is
// ErrLinkNotFound, which callers tell from other failures.
func TestMissingLinkIsNotFound(t *testing.T) {
	n := newTestNS(t)
	if _, err := n.h.LinkByName("vp-none"); !errors.Is(err, ErrLinkNotFound) || !strings.Contains(err.Error(), "vp-none") {
		t.Errorf("missing name: %v, want ErrLinkNotFound naming it", err)
	}
	if _, err := n.h.LinkByIndex(1 << 20); !errors.Is(err, ErrLinkNotFound) {
		t.Errorf("missing index: %v, want ErrLinkNotFound", err)
	}
}

// TestAddressesMatchTheLibrary: addresses put on, replaced, listed (per
// link and all) and taken off as the library sees them, IPv4 and IPv6.
func TestAddressesMatchTheLibrary(t *testing.T) {
	n := newTestNS(t)
	n.Veth(t, "vp-a", "vp-b")
	a, _ := n.h.LinkByName("vp-a")
	b, _ := n.h.LinkByName("vp-b")
	v4, v6 := netip.MustParsePrefix("192.0.2.10/32"), netip.MustParsePrefix("2001:db8::10/128")
	for _, p := range []netip.Prefix{v4, v6} {
		if err := n.h.AddrReplace(a, Addr{Prefix: p, Flags: unix.IFA_F_NODAD}); err != nil {
			t.Fatal(err)
		}
		if err := n.h.AddrReplace(a, Addr{Prefix: p, Flags: unix.IFA_F_NODAD}); err != nil {
			t.Errorf("replacing %s where it is: %v", p, err)
		}
	}
	n.IP(t, "addr", "add", "198.51.100.7/24", "dev", "vp-b")
	check := func(stage string, link Link, want ...netip.Prefix) {
		t.Helper()
		got, err := n.h.AddrList(link.Index)
		if err != nil {
			t.Fatal(err)
		}
		var prefixes []netip.Prefix
		for _, g := range got {
			if g.Prefix.Addr().IsLinkLocalUnicast() {
				continue // the veth's own fe80::
			}
			prefixes = append(prefixes, g.Prefix)
		}
		slices.SortFunc(prefixes, func(x, y netip.Prefix) int { return x.Addr().Compare(y.Addr()) })
		if !slices.Equal(prefixes, want) {
			t.Errorf("%s: %s has %v, want %v", stage, link.Name, prefixes, want)
		}
	}
	check("added", a, v4, v6)
	check("added", b, netip.MustParsePrefix("198.51.100.7/24"))

	// All links' addresses, field by field against the library's.
	all, err := n.h.AddrList(0)
	if err != nil {
		t.Fatal(err)
	}
	want, err := n.oracle.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(want) {
		t.Fatalf("%d addresses in all, the library %d", len(all), len(want))
	}
	for i, w := range want {
		ones, _ := w.Mask.Size()
		ip, _ := netip.AddrFromSlice(w.IP)
		exp := Addr{Prefix: netip.PrefixFrom(ip.Unmap(), ones), LinkIndex: w.LinkIndex, Scope: uint8(w.Scope), Flags: uint32(w.Flags)}
		if all[i] != exp {
			t.Errorf("address %d: %+v, the library %+v", i, all[i], exp)
		}
	}

	if err := n.h.AddrDel(a, v4); err != nil {
		t.Fatal(err)
	}
	check("v4 taken off", a, v6)
	if err := n.h.AddrDel(a, v4); !errors.Is(err, unix.EADDRNOTAVAIL) {
		t.Errorf("taking off an address not there: %v, want EADDRNOTAVAIL", err)
	}
}

// TestLinkDelAndAddrGen: a link's IPv6 address generation turned off (no
// fe80:: when it comes up), then the link deleted.
func TestLinkDelAndAddrGen(t *testing.T) {
	n := newTestNS(t)
	n.IP(t, "link", "add", "vp-a", "type", "veth", "peer", "name", "vp-b")
	a, _ := n.h.LinkByName("vp-a")
	if err := n.h.DisableIPv6AddrGen(a); err != nil {
		t.Fatal(err)
	}
	if out, err := n.Exec("cat", "/proc/sys/net/ipv6/conf/vp-a/addr_gen_mode"); err != nil || strings.TrimSpace(out) != "1" {
		t.Errorf("addr_gen_mode of vp-a: %q (%v), want 1 (none)", out, err)
	}
	if err := n.h.LinkDel(a); err != nil {
		t.Fatal(err)
	}
	if _, err := n.h.LinkByName("vp-a"); !errors.Is(err, ErrLinkNotFound) {
		t.Errorf("vp-a after LinkDel: %v, want not found", err)
	}
	if _, err := n.h.LinkByName("vp-b"); !errors.Is(err, ErrLinkNotFound) {
		t.Errorf("its peer after LinkDel: %v, want gone with it", err)
	}
}

// TestAddDummy makes a dummy link where the kernel has the module (the
// VMs); elsewhere the error must say what failed, naming the link.
func TestAddDummy(t *testing.T) {
	n := newTestNS(t)
	err := n.h.AddDummy("vp-dummy")
	if err != nil {
		if !strings.Contains(err.Error(), "vp-dummy") {
			t.Errorf("error without the link's name: %v", err)
		}
		if errors.Is(err, unix.EOPNOTSUPP) {
			t.Skipf("no dummy module in this kernel: %v", err)
		}
		t.Fatal(err)
	}
	l, err := n.oracle.LinkByName("vp-dummy")
	if err != nil || l.Type() != "dummy" {
		t.Fatalf("the library sees %v (%v), want a dummy link", l, err)
	}
	if err := n.h.AddDummy("vp-dummy"); !errors.Is(err, unix.EEXIST) {
		t.Errorf("adding it again: %v, want EEXIST", err)
	}
}

// TestInNetNSReturns: the function runs in the namespace, and the thread
// that ran it is back in its own (or never used again).
func TestInNetNSReturns(t *testing.T) {
	n := newTestNS(t)
	own, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Skip(err)
	}
	var inside string
	if err := InNetNS(n.fd, func() error {
		inside, err = os.Readlink("/proc/thread-self/ns/net")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if inside == own {
		t.Errorf("fn ran in the caller's namespace %s", own)
	}
	// The threads Go hands out next, the one that ran fn among them, are
	// all back in the caller's namespace.
	for range 20 {
		done := make(chan string)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			ns, _ := os.Readlink("/proc/thread-self/ns/net")
			done <- ns
		}()
		if now := <-done; now != own {
			t.Fatalf("a thread is still in %s, want %s", now, own)
		}
	}
	if err := InNetNS(-1, func() error { t.Error("fn ran without a namespace"); return nil }); err == nil {
		t.Error("a bad namespace descriptor: no error")
	}
}

// TestClosedHandle: a request on a closed handle is an error, not a
// write to a descriptor number that something else may hold by then.
func TestClosedHandle(t *testing.T) {
	h, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	h.Close()
	if _, err := h.LinkByName("lo"); err == nil {
		t.Error("a closed handle answered")
	}
}

// TestLongDumpMatchesTheLibrary: a dump the kernel sends in several
// datagrams (hundreds of addresses) comes back whole and intact; keeping
// the messages of a datagram whose buffer the next one reused mangled
// them.
func TestLongDumpMatchesTheLibrary(t *testing.T) {
	n := newTestNS(t)
	n.Veth(t, "vp-a", "vp-b")
	a, _ := n.h.LinkByName("vp-a")
	const count = 600
	for i := range count {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 9, byte(i >> 8), byte(i)}), 32)
		if err := n.h.AddrReplace(a, Addr{Prefix: p}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := n.h.AddrList(a.Index)
	if err != nil {
		t.Fatal(err)
	}
	want, err := n.oracle.AddrList(mustOracleLink(t, n, "vp-a"), netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(got) < count {
		t.Fatalf("%d addresses on vp-a, the library %d, want at least %d", len(got), len(want), count)
	}
	for i, w := range want {
		if ip, _ := netip.AddrFromSlice(w.IP); got[i].Prefix.Addr() != ip.Unmap() {
			t.Fatalf("address %d: %s, the library %s", i, got[i].Prefix, w.IPNet)
		}
	}
}

func mustOracleLink(t *testing.T, n *testNS, name string) netlink.Link {
	t.Helper()
	l, err := n.oracle.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestDumpDuringChanges: while another handle takes the link's first
// address off and puts it back (shifting the others' places in the kernel's
// list), every list holds all the addresses that stay: a dump that the
// kernel marks interrupted may skip one, so it is asked again, and said to
// have failed rather than returned short.
func TestDumpDuringChanges(t *testing.T) {
	n := newTestNS(t)
	n.Veth(t, "vp-a", "vp-b")
	a, _ := n.h.LinkByName("vp-a")
	const count = 600
	prefix := func(i int) netip.Prefix {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 9, byte(i >> 8), byte(i)}), 32)
	}
	for i := range count {
		if err := n.h.AddrReplace(a, Addr{Prefix: prefix(i)}); err != nil {
			t.Fatal(err)
		}
	}
	churn, err := OpenAt(n.fd)
	if err != nil {
		t.Fatal(err)
	}
	defer churn.Close()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%2 == 0 {
				churn.AddrDel(a, prefix(0))
			} else {
				churn.AddrReplace(a, Addr{Prefix: prefix(0)})
			}
		}
	}()
	defer func() { close(stop); <-done }()
	lists, failed := 0, 0
	for range 300 {
		got, err := n.h.AddrList(a.Index)
		if err != nil {
			failed++ // said, not wrong
			continue
		}
		lists++
		have := map[netip.Prefix]bool{}
		for _, g := range got {
			have[g.Prefix] = true
		}
		for i := 1; i < count; i++ {
			if !have[prefix(i)] {
				t.Fatalf("a list during the churn lacks %s (%d addresses)", prefix(i), len(got))
			}
		}
	}
	t.Logf("%d lists whole, %d said the churn defeated them", lists, failed)
}

package discovery

import (
	"net/netip"
	"slices"
	"syscall"
	"testing"
	"time"
)

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func TestMerge(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	grace := 30 * time.Second
	p := Policy{VIPs: []netip.Addr{netip.MustParseAddr("192.0.2.10")}, Max: 3, Grace: grace}
	a, b, c, d := ap("192.0.2.1:6443"), ap("192.0.2.2:6443"), ap("192.0.2.3:6443"), ap("192.0.2.4:6443")
	active := func(as ...netip.AddrPort) []Member {
		var out []Member
		for _, x := range as {
			out = append(out, Member{Addr: x, Source: Discovered})
		}
		return out
	}
	draining := func(x netip.AddrPort, until time.Time) Member {
		return Member{Addr: x, Source: Discovered, DrainUntil: until}
	}
	cases := []struct {
		name   string
		prev   []Member
		answer []netip.AddrPort
		now    time.Time
		want   []Member
		events []string
	}{
		{"first answer adds", nil, []netip.AddrPort{b, a}, t0, active(a, b), []string{"added", "added"}},
		{"a new endpoint is added", active(a, b), []netip.AddrPort{a, b, c}, t0, active(a, b, c), []string{"added"}},
		{"a removed endpoint drains", active(a, b), []netip.AddrPort{a}, t0,
			[]Member{{Addr: a, Source: Discovered}, draining(b, t0.Add(grace))}, []string{"draining"}},
		{"a draining endpoint stays until its grace is over", []Member{{Addr: a, Source: Discovered}, draining(b, t0.Add(grace))},
			[]netip.AddrPort{a}, t0.Add(grace - time.Second), []Member{{Addr: a, Source: Discovered}, draining(b, t0.Add(grace))}, nil},
		{"then it is dropped", []Member{{Addr: a, Source: Discovered}, draining(b, t0.Add(grace))},
			[]netip.AddrPort{a}, t0.Add(grace), active(a), []string{"dropped"}},
		{"flap: listed again while draining returns at once", []Member{{Addr: a, Source: Discovered}, draining(b, t0.Add(grace))},
			[]netip.AddrPort{a, b}, t0.Add(time.Second), active(a, b), []string{"returned"}},
		{"empty answer keeps the last known set", active(a, b), nil, t0, active(a, b), []string{"kept"}},
		{"an answer with only refused endpoints keeps the set", active(a), []netip.AddrPort{ap("192.0.2.10:6443"), ap("[fe80::1]:6443")}, t0,
			active(a), []string{"refused", "refused", "kept"}},
		{"the VIP is refused", nil, []netip.AddrPort{a, ap("192.0.2.10:6443")}, t0, active(a), []string{"refused", "added"}},
		{"link-local is refused (one note for both)", nil, []netip.AddrPort{ap("169.254.0.5:6443"), a, ap("[fe80::1%eth0]:6443")}, t0, active(a),
			[]string{"refused", "added"}},
		{"not unicast is refused", nil, []netip.AddrPort{ap("0.0.0.0:6443"), ap("224.0.0.1:6443"), a}, t0, active(a),
			[]string{"refused", "added"}},
		{"more than max: the last in address order are refused", nil, []netip.AddrPort{d, c, b, a}, t0, active(a, b, c),
			[]string{"refused", "added", "added", "added"}},
		{"duplicates count once", nil, []netip.AddrPort{a, a, ap("[::ffff:192.0.2.1]:6443")}, t0, active(a), []string{"added"}},
		{"remembered becomes discovered, an unlisted remembered drains", []Member{{Addr: a, Source: Remembered}, {Addr: b, Source: Remembered}},
			[]netip.AddrPort{a}, t0, []Member{{Addr: a, Source: Discovered}, {Addr: b, Source: Remembered, DrainUntil: t0.Add(grace)}}, []string{"draining"}},
		{"an empty answer still ends a drain that is over", []Member{{Addr: a, Source: Discovered}, draining(b, t0)}, nil, t0,
			active(a), []string{"kept", "dropped"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, notes := Merge(tc.prev, tc.answer, tc.now, p)
			if !slices.Equal(got, tc.want) {
				t.Errorf("members:\n got %v\nwant %v", got, tc.want)
			}
			var events []string
			for _, n := range notes {
				events = append(events, n.Event)
			}
			if !slices.Equal(events, tc.events) {
				t.Errorf("events: got %v, want %v (%v)", events, tc.events, notes)
			}
		})
	}
}

func TestMergeDoesNotModifyItsInput(t *testing.T) {
	prev := []Member{{Addr: ap("192.0.2.1:6443"), Source: Discovered}, {Addr: ap("192.0.2.2:6443"), Source: Discovered}}
	keep := slices.Clone(prev)
	Merge(prev, []netip.AddrPort{ap("192.0.2.1:6443")}, time.Now(), Policy{Grace: time.Minute})
	Merge(prev, nil, time.Now(), Policy{})
	if !slices.Equal(prev, keep) {
		t.Fatalf("input changed: %v", prev)
	}
}

// A cluster that lists 16 new endpoints at every answer (churn) never
// makes the members, draining ones included, more than max_backends.
func TestMergeBoundsTheDrainingMembersToo(t *testing.T) {
	p := Policy{Max: 16, Grace: time.Hour}
	now := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	var members []Member
	for round := range 700 {
		answer := make([]netip.AddrPort, 16)
		for i := range answer {
			answer[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(round >> 8), byte(round), byte(i + 1)}), 6443)
		}
		members, _ = Merge(members, answer, now, p)
		if len(members) > p.Max {
			t.Fatalf("round %d: %d members (%d active), max_backends %d", round, len(members), len(Active(members)), p.Max)
		}
		if got := Active(members); !slices.Equal(got, answer) {
			t.Fatalf("round %d: the active members are %v, want the answer %v", round, got, answer)
		}
		now = now.Add(100 * time.Millisecond)
	}
	// With room, a removed member still drains for its grace.
	a, b := ap("192.0.2.1:6443"), ap("192.0.2.2:6443")
	members, _ = Merge(nil, []netip.AddrPort{a, b}, now, p)
	members, _ = Merge(members, []netip.AddrPort{a}, now, p)
	if len(members) != 2 || !members[1].Draining() {
		t.Fatalf("a removed member within the bound: %v, want it draining", members)
	}
}

// cpuTime is the CPU this process used so far (user + system): the tests
// below bound work, not wall time, so a loaded machine does not fail them.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// An answer of 270,000 endpoints, most of them refused, is merged in
// linear time and summed up in one note per reason. The bound is 50 times
// what it costs (about 0.1 s of CPU); the quadratic merge took minutes.
func TestMergeOfAHugeAnswerIsLinearAndLogsOncePerReason(t *testing.T) {
	answer := make([]netip.AddrPort, 0, 270_000)
	for i := range 270_000 {
		answer = append(answer, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 6443))
	}
	for i := range 1000 {
		answer = append(answer, netip.AddrPortFrom(netip.AddrFrom4([4]byte{169, 254, byte(i >> 8), byte(i)}), 6443))
	}
	before := cpuTime(t)
	members, notes := Merge(nil, answer, time.Now(), Policy{Max: 16})
	used := cpuTime(t) - before
	if used > 5*time.Second {
		t.Errorf("merging 271,000 endpoints used %s of CPU", used)
	}
	t.Logf("merging 271,000 endpoints used %s of CPU", used)
	if len(members) != 16 {
		t.Errorf("%d members, want 16", len(members))
	}
	var refused []Note
	for _, n := range notes {
		if n.Event == "refused" {
			refused = append(refused, n)
		}
	}
	if len(refused) != 2 || refused[0].Count != 1000 || refused[1].Count != 270_000-16 {
		t.Errorf("refusals: %+v, want one note of 1000 link-local and one of %d beyond max_backends", refused, 270_000-16)
	}
}

// Every spelling of an address the node must not dial is refused before
// any dial, and a NAT64 form of a good address is not.
func TestRefuse(t *testing.T) {
	p := Policy{
		VIPs: []netip.Addr{netip.MustParseAddr("192.0.2.10")},
		Own:  []netip.AddrPort{ap("192.0.2.20:9280"), ap("[::]:9100")},
		IsLocal: func(a netip.Addr) bool {
			return a == netip.MustParseAddr("192.0.2.21")
		},
	}
	cases := []struct {
		addr string
		want string
	}{
		{"192.0.2.1:6443", ""},
		{"[2001:db8::1]:6443", ""},
		{"[64:ff9b::c000:201]:6443", ""}, // NAT64 form of 192.0.2.1
		{"127.0.0.1:6443", refusedLoopback},
		{"127.8.9.1:6443", refusedLoopback},
		{"[::1]:6443", refusedLoopback},
		{"[::ffff:127.0.0.1]:6443", refusedLoopback},
		{"169.254.169.254:80", refusedLinkLocal},
		{"[fe80::1]:6443", refusedLinkLocal},
		{"[fe80::1%eth0]:6443", refusedLinkLocal},
		{"[64:ff9b::a9fe:a9fe]:80", refusedEmbedded},                   // NAT64 well-known prefix, metadata
		{"[64:ff9b::7f00:1]:6443", refusedEmbedded},                    // NAT64 of loopback
		{"[64:ff9b::c000:20a]:6443", refusedEmbedded},                  // NAT64 of the VIP
		{"[64:ff9b:1:a9fe:a9:fe00::]:80", refusedEmbedded},             // local-use prefix, /48 layout
		{"[64:ff9b:1::a9fe:a9fe]:80", refusedEmbedded},                 // local-use prefix, /96 layout
		{"[2002:a9fe:a9fe::1]:80", refusedEmbedded},                    // 6to4
		{"[2001:0:4136:e378:8000:63bf:5601:5601]:80", refusedEmbedded}, // Teredo of 169.254.169.254
		{"[::a9fe:a9fe]:80", refusedEmbedded},                          // IPv4-compatible
		{"[fd00:ec2::254]:80", refusedMetadata},
		{"100.100.100.200:80", refusedMetadata},
		{"168.63.129.16:80", refusedMetadata},        // Azure's wire server
		{"[64:ff9b::a83f:8110]:80", refusedEmbedded}, // its NAT64 form
		{"192.0.2.10:6443", refusedVIP},
		{"[::ffff:192.0.2.10]:6443", refusedVIP},
		{"0.0.0.0:6443", refusedUnicast},
		{"224.0.0.1:6443", refusedUnicast},
		{"255.255.255.255:6443", refusedUnicast},
		{"192.0.2.1:0", refusedNoPort},
		{"192.0.2.20:9280", refusedOwn},
		{"192.0.2.21:9100", refusedOwn}, // a local address on a wildcard listener's port
		{"192.0.2.22:9100", ""},         // another host on that port
	}
	for _, tc := range cases {
		a := netip.MustParseAddrPort(tc.addr)
		if got := p.refuse(netip.AddrPortFrom(a.Addr().Unmap(), a.Port())); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.addr, got, tc.want)
		}
	}
	p.AllowLoopback = true
	if got := p.refuse(ap("127.0.0.1:6443")); got != "" {
		t.Errorf("127.0.0.1 with AllowLoopback: %q", got)
	}
	if got := p.refuse(ap("127.0.0.1:9100")); got != refusedOwn {
		t.Errorf("127.0.0.1 on a wildcard listener's port with AllowLoopback: %q", got)
	}
}

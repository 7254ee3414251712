package discovery

import (
	"net/netip"
	"slices"
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
		{"link-local is refused", nil, []netip.AddrPort{ap("169.254.0.5:6443"), a, ap("[fe80::1%eth0]:6443")}, t0, active(a),
			[]string{"refused", "refused", "added"}},
		{"not unicast is refused", nil, []netip.AddrPort{ap("0.0.0.0:6443"), ap("224.0.0.1:6443"), a}, t0, active(a),
			[]string{"refused", "refused", "added"}},
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

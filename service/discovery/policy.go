package discovery

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"time"
)

// Source says where a backend came from.
type Source string

// Sources, as /status and the metrics show them.
const (
	Static     Source = "static"     // the [[backend]] list of the config file
	Discovered Source = "discovered" // the kubernetes EndpointSlice, seen by this process
	Remembered Source = "remembered" // the last known set on disk, not confirmed yet
)

// Member is one discovered apiserver and where it stands.
type Member struct {
	Addr   netip.AddrPort
	Source Source // Discovered or Remembered
	// DrainUntil is zero while the member takes new connections; once the
	// cluster no longer lists it, it is when its connections are closed.
	DrainUntil time.Time
}

// Draining reports whether the member only keeps its open connections.
func (m Member) Draining() bool { return !m.DrainUntil.IsZero() }

// Policy is what the merge refuses and how long a removed member drains.
type Policy struct {
	// VIPs are never backends: the proxy would feed itself.
	VIPs []netip.Addr
	// Max bounds the discovered set; more endpoints are refused.
	Max int
	// Grace is how long a removed member keeps its open connections.
	Grace time.Duration
}

// Note is one thing the merge did that deserves a log line.
type Note struct {
	Addr   netip.AddrPort
	Event  string // added, draining, returned, dropped, refused, kept
	Reason string
}

// Merge applies one answer of the cluster to the members at now and
// returns the next members (sorted by address) and what changed. It is
// the whole policy, pure so that it can be table-tested:
//   - an endpoint equal to a VIP, link-local or not unicast is refused;
//     beyond Max (in address order) the rest are refused;
//   - an answer with nothing left keeps the members as they are: an empty
//     or broken answer must never empty the pool;
//   - a new endpoint is added; a listed draining one returns at once (a
//     flap keeps its connections); a remembered one becomes discovered;
//   - a member no longer listed drains for Grace, then is dropped.
func Merge(members []Member, answer []netip.AddrPort, now time.Time, p Policy) ([]Member, []Note) {
	accepted, notes := filter(answer, p)
	if len(accepted) == 0 {
		notes = append(notes, Note{Event: "kept", Reason: "no usable endpoint in the answer: keeping the last known set"})
		return expire(slices.Clone(members), now, &notes), notes
	}
	var next []Member
	for _, a := range accepted {
		i := slices.IndexFunc(members, func(m Member) bool { return m.Addr == a })
		switch {
		case i < 0:
			notes = append(notes, Note{Addr: a, Event: "added"})
		case members[i].Draining():
			notes = append(notes, Note{Addr: a, Event: "returned", Reason: "listed again while draining"})
		}
		next = append(next, Member{Addr: a, Source: Discovered})
	}
	for _, m := range members {
		if slices.Contains(accepted, m.Addr) {
			continue
		}
		if !m.Draining() {
			m.DrainUntil = now.Add(p.Grace)
			notes = append(notes, Note{Addr: m.Addr, Event: "draining", Reason: fmt.Sprintf("no longer listed; connections kept for %s", p.Grace)})
		}
		next = append(next, m)
	}
	next = expire(next, now, &notes)
	sort.Slice(next, func(i, j int) bool { return compareAddrPort(next[i].Addr, next[j].Addr) < 0 })
	return next, notes
}

// Expire drops the members whose grace is over; Merge does it too, and the
// watcher calls it on a timer so that a quiet cluster still ends drains.
func Expire(members []Member, now time.Time) ([]Member, []Note) {
	var notes []Note
	return expire(slices.Clone(members), now, &notes), notes
}

func expire(members []Member, now time.Time, notes *[]Note) []Member {
	return slices.DeleteFunc(members, func(m Member) bool {
		if m.Draining() && !now.Before(m.DrainUntil) {
			*notes = append(*notes, Note{Addr: m.Addr, Event: "dropped", Reason: "grace over"})
			return true
		}
		return false
	})
}

// filter returns the usable endpoints of an answer, deduplicated and in
// address order, and a note for each one refused.
func filter(answer []netip.AddrPort, p Policy) ([]netip.AddrPort, []Note) {
	var ok []netip.AddrPort
	var notes []Note
	for _, a := range answer {
		a = netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
		if reason := refuse(a, p.VIPs); reason != "" {
			notes = append(notes, Note{Addr: a, Event: "refused", Reason: reason})
			continue
		}
		if !slices.Contains(ok, a) {
			ok = append(ok, a)
		}
	}
	sortAddrs(ok)
	if p.Max > 0 && len(ok) > p.Max {
		for _, a := range ok[p.Max:] {
			notes = append(notes, Note{Addr: a, Event: "refused", Reason: fmt.Sprintf("more than discovery.max_backends = %d endpoints", p.Max)})
		}
		ok = ok[:p.Max]
	}
	return ok, notes
}

func refuse(a netip.AddrPort, vips []netip.Addr) string {
	ip := a.Addr()
	switch {
	case !a.IsValid() || a.Port() == 0:
		return "no address or port"
	case ip.Zone() != "" || ip.IsLinkLocalUnicast():
		return "link-local address"
	case slices.Contains(vips, ip):
		return "the VIP itself: the proxy would feed itself"
	case !ip.IsGlobalUnicast() && !ip.IsLoopback():
		return "not a unicast address"
	}
	return ""
}

// sortAddrs sorts in address order. sort.Slice rather than slices.SortFunc:
// each type slices sorts costs the binary about 12 KB of generic code.
func sortAddrs(as []netip.AddrPort) {
	sort.Slice(as, func(i, j int) bool { return compareAddrPort(as[i], as[j]) < 0 })
}

func compareAddrPort(a, b netip.AddrPort) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Port(), b.Port()))
}

// Active returns the addresses of the members that take new connections.
func Active(members []Member) []netip.AddrPort {
	var out []netip.AddrPort
	for _, m := range members {
		if !m.Draining() {
			out = append(out, m.Addr)
		}
	}
	return out
}

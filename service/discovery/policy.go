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
	// Own are this process's listeners (the VIP port, the admin port): an
	// endpoint there is refused. An unspecified address stands for every
	// local one.
	Own []netip.AddrPort
	// IsLocal says whether an address is one of this host's (for Own's
	// unspecified addresses); nil knows only loopback.
	IsLocal func(netip.Addr) bool
	// AllowLoopback accepts endpoints on 127.0.0.0/8 and ::1. A real
	// apiserver never publishes one (it refuses to); stand-ins in tests do.
	AllowLoopback bool
	// Max bounds the discovered set; more endpoints are refused.
	Max int
	// Grace is how long a removed member keeps its open connections.
	Grace time.Duration
}

// Note is one thing the merge did that deserves a log line. The refusals
// of one answer are summed up by reason, so that a hostile answer of a
// million endpoints costs one line per reason, not a million.
type Note struct {
	Addr   netip.AddrPort // for refused: the first one refused
	Event  string         // added, draining, returned, dropped, refused, kept
	Reason string
	Count  int // refused: how many endpoints for this reason
}

// Merge applies one answer of the cluster to the members at now and
// returns the next members (sorted by address) and what changed. It is
// the whole policy, pure so that it can be table-tested, and linear in
// the answer after one sort:
//   - an endpoint refused by Policy.refuse is not used; beyond Max (in
//     address order) the rest are refused;
//   - an answer with nothing left keeps the members as they are: an empty
//     or broken answer must never empty the pool;
//   - a new endpoint is added; a listed draining one returns at once (a
//     flap keeps its connections); a remembered one becomes discovered;
//   - a member no longer listed drains for Grace, then is dropped;
//   - the members, draining ones included, are never more than Max: when
//     new endpoints need the room, the drains that end first end now
//     (a churning cluster must not grow the pool, its checks and its
//     metrics without bound).
func Merge(members []Member, answer []netip.AddrPort, now time.Time, p Policy) ([]Member, []Note) {
	accepted, notes := filter(answer, p)
	if len(accepted) == 0 {
		notes = append(notes, Note{Event: "kept", Reason: "no usable endpoint in the answer: keeping the last known set"})
		return expire(slices.Clone(members), now, &notes), notes
	}
	byAddr := make(map[netip.AddrPort]Member, len(members))
	for _, m := range members {
		byAddr[m.Addr] = m
	}
	listed := make(map[netip.AddrPort]bool, len(accepted))
	next := make([]Member, 0, len(accepted)+len(members))
	for _, a := range accepted {
		listed[a] = true
		m, known := byAddr[a]
		switch {
		case !known:
			notes = append(notes, Note{Addr: a, Event: "added"})
		case m.Draining():
			notes = append(notes, Note{Addr: a, Event: "returned", Reason: "listed again while draining"})
		}
		next = append(next, Member{Addr: a, Source: Discovered})
	}
	var gone []Member
	for _, m := range members {
		if listed[m.Addr] {
			continue
		}
		if !m.Draining() {
			m.DrainUntil = now.Add(p.Grace)
			notes = append(notes, Note{Addr: m.Addr, Event: "draining", Reason: fmt.Sprintf("no longer listed; connections kept for %s", p.Grace)})
		}
		gone = append(gone, m)
	}
	gone = expire(gone, now, &notes)
	next = append(next, bound(gone, p.Max-len(next), &notes)...)
	sort.Slice(next, func(i, j int) bool { return compareAddrPort(next[i].Addr, next[j].Addr) < 0 })
	return next, notes
}

// bound keeps at most room of the draining members, those that drain
// longest; the others are dropped now.
func bound(draining []Member, room int, notes *[]Note) []Member {
	if room < 0 || len(draining) <= room {
		return draining
	}
	sort.SliceStable(draining, func(i, j int) bool { return draining[i].DrainUntil.After(draining[j].DrainUntil) })
	for _, m := range draining[room:] {
		*notes = append(*notes, Note{Addr: m.Addr, Event: "dropped", Reason: "discovery.max_backends members with the draining ones: its drain ends early"})
	}
	return draining[:room]
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
// address order, and one note per reason of refusal. Sort then compact:
// an answer of 270,000 endpoints costs milliseconds, not minutes.
func filter(answer []netip.AddrPort, p Policy) ([]netip.AddrPort, []Note) {
	ok := make([]netip.AddrPort, 0, min(len(answer), 4096))
	refused := map[string]*Note{}
	var order []string
	for _, a := range answer {
		a = netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
		reason := p.refuse(a)
		if reason == "" {
			ok = append(ok, a)
			continue
		}
		if n := refused[reason]; n != nil {
			n.Count++
			continue
		}
		refused[reason] = &Note{Addr: a, Event: "refused", Reason: reason, Count: 1}
		order = append(order, reason)
	}
	ok = sortUnique(ok)
	var notes []Note
	for _, r := range order {
		notes = append(notes, *refused[r])
	}
	if p.Max > 0 && len(ok) > p.Max {
		notes = append(notes, Note{Addr: ok[p.Max], Event: "refused", Count: len(ok) - p.Max,
			Reason: fmt.Sprintf("more than discovery.max_backends = %d endpoints", p.Max)})
		ok = ok[:p.Max]
	}
	return ok, notes
}

// sortUnique sorts in address order and removes duplicates in place.
func sortUnique(as []netip.AddrPort) []netip.AddrPort {
	sortAddrs(as)
	return slices.Compact(as)
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

package discovery

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/standin"
)

// listsIn counts the lists the watcher makes in d against a server whose
// every watch fails with fault.
func listsIn(t *testing.T, fault string, d time.Duration) (lists int, st Status) {
	a := newAPI(t)
	a.slices.SetAddrs(ap("192.0.2.1:6443"))
	a.setFault(fault)
	w, ch := run(t, Options{Credentials: certCreds(a), Seeds: []string{a.addr()}, Policy: Policy{Max: 16},
		BackoffMin: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond, Damping: time.Millisecond})
	waitFor(t, ch, []string{"192.0.2.1:6443"}, nil)
	l0, _ := a.slices.Requests()
	time.Sleep(d)
	l1, _ := a.slices.Requests()
	return l1 - l0, w.Status()
}

// A server that closes every watch at once, or answers every watch with
// 410 Gone, is listed less and less often, as client-go's reflector does:
// pauses of 20, 40, 80, 160 ms, then 200 ms (each up to twice as long)
// give at most 14 lists in 2 s. Before, each cycle counted as progress and
// the pause stayed at its minimum: over a hundred lists.
func TestShortWatchesBackOff(t *testing.T) {
	lists, st := listsIn(t, "short-watch", 2*time.Second)
	if lists > 14 {
		t.Errorf("%d lists in 2 s against a server that closes each watch at once", lists)
	}
	if st.Errors == 0 || st.LastError == "" {
		t.Errorf("short watches are not counted as errors: %+v", st)
	}
}

func TestRepeated410BacksOff(t *testing.T) {
	if lists, _ := listsIn(t, "gone-watch", 2*time.Second); lists > 14 {
		t.Errorf("%d lists in 2 s against a server that answers each watch with 410", lists)
	}
}

func TestBackoffLikeTheReflector(t *testing.T) {
	b := backoff{min: time.Second, max: 8 * time.Second, reset: time.Minute}
	now := time.Now()
	for i, want := range []time.Duration{1, 2, 4, 8, 8} {
		got := b.next(now)
		if got < want*time.Second || got > 2*want*time.Second {
			t.Errorf("pause %d: %s, want %s..%s", i, got, want*time.Second, 2*want*time.Second)
		}
		now = now.Add(got)
	}
	if got := b.next(now.Add(2 * time.Minute)); got > 2*time.Second {
		t.Errorf("after a long watch the pause is %s, want it back to 1..2 s", got)
	}
}

// A cluster flapping between two sets every 5 ms for 1.5 s is merged at
// most once per Damping (100 ms) and the state file is written at most
// once per StateEvery (500 ms); before, both followed every answer.
func TestFlappingIsDampedAndStateWritesCoalesced(t *testing.T) {
	a := newAPI(t)
	x, y := ap("192.0.2.1:6443"), ap("192.0.2.2:6443")
	a.slices.SetAddrs(x)
	state := filepath.Join(t.TempDir(), StateFile)
	_, ch := run(t, Options{Credentials: certCreds(a), Seeds: []string{a.addr()}, Policy: Policy{Max: 16, Grace: time.Minute},
		StatePath: state, Damping: 100 * time.Millisecond, StateEvery: 500 * time.Millisecond})
	waitFor(t, ch, []string{x.String()}, nil)
	writes := map[string]bool{}
	changes := 0
	start := time.Now()
	for i := 0; time.Since(start) < 1500*time.Millisecond; i++ {
		if i%2 == 0 {
			a.slices.SetAddrs(x, y)
		} else {
			a.slices.SetAddrs(x)
		}
		time.Sleep(5 * time.Millisecond)
		if data, err := os.ReadFile(state); err == nil {
			writes[string(data)] = true // each write has its own time stamp
		}
		for len(ch) > 0 {
			<-ch
			changes++
		}
	}
	// The bounds follow the time the loop really took: a loaded machine
	// that stalls its last sleep lets more periods pass. Two more than
	// the periods that passed: the first merge (or write) and one at each end.
	elapsed := time.Since(start)
	if most := int(elapsed/(100*time.Millisecond)) + 2; changes > most {
		t.Errorf("%d changes of the members in %s, want at most one per 100 ms (%d)", changes, elapsed, most)
	}
	if most := int(elapsed/(500*time.Millisecond)) + 2; len(writes) > most {
		t.Errorf("%d state-file writes seen in %s, want at most one per 500 ms (%d)", len(writes), elapsed, most)
	}
}

// A bookmark on a watch of a 100,000-endpoint slice costs next to nothing:
// the answer did not change, so nothing is merged. The CPU of the whole
// test process (the server's side included) per bookmark read is bounded
// at 10 ms; before, each event cost seconds (a quadratic union and a
// merge per event).
func TestBookmarksOnAHugeSliceCostNothing(t *testing.T) {
	a := newAPI(t)
	huge := make([]netip.AddrPort, 100_000)
	for i := range huge {
		huge[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 6443)
	}
	a.slices.SetAddrs(huge...)
	a.slices.Bookmark = 2 * time.Millisecond
	w, ch := run(t, Options{Credentials: certCreds(a), Seeds: []string{a.addr()}, Policy: Policy{Max: 16},
		MaxBody: 8 << 20, Resync: time.Minute})
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal("the 100,000-endpoint list was not merged in 30 s")
	}
	waitStatus(t, w, "a first bookmark", func(s Status) bool { return s.Events > 0 })
	// At least 20 bookmarks, however long a loaded host takes to send
	// them (waitStatus bounds the wait at 20 s): the bound is on CPU
	// per bookmark, which load does not stretch as it does wall time.
	e0, c0 := w.Status().Events, cpuTime(t)
	e1 := waitStatus(t, w, "20 bookmarks later", func(s Status) bool { return s.Events >= e0+20 }).Events
	c1 := cpuTime(t)
	bookmarks := e1 - e0
	if per := (c1 - c0) / time.Duration(bookmarks); per > 10*time.Millisecond {
		t.Errorf("%s of CPU per bookmark (%d bookmarks)", per, bookmarks)
	}
	t.Logf("%d bookmarks, %s of CPU each", bookmarks, fmt.Sprint((c1-c0)/time.Duration(bookmarks)))
}

// Only the slice the apiservers write is read: a slice another writer
// gives the same service-name label (anyone allowed to create
// EndpointSlices in default can) adds no backend, whether the server
// honours the field selector or not, in the list and in the watch.
func TestForeignSlicesAreIgnored(t *testing.T) {
	for _, fault := range []string{"", "ignore-field-selector"} {
		t.Run("fault="+fault, func(t *testing.T) {
			a := newAPI(t)
			a.setFault(fault)
			a.slices.SetAddrs(ap("192.0.2.1:6443"))
			a.slices.AddForeign("evil", nil, standin.Endpoint{Addr: ap("192.0.2.66:6443")})
			w, ch := run(t, Options{Credentials: certCreds(a), Seeds: []string{a.addr()}, Policy: Policy{Max: 16, Grace: time.Minute},
				Damping: time.Millisecond})
			waitFor(t, ch, []string{"192.0.2.1:6443"}, nil)
			waitStatus(t, w, "watching", func(s Status) bool { return s.State == StateWatching })
			a.slices.AddForeign("kubernetes-evil", map[string]string{"endpointslice.kubernetes.io/managed-by": "someone"},
				standin.Endpoint{Addr: ap("192.0.2.67:6443")})
			a.slices.AddForeign("evil", nil, standin.Endpoint{Addr: ap("192.0.2.68:6443")})
			a.slices.SetAddrs(ap("192.0.2.1:6443"), ap("192.0.2.2:6443"))
			waitFor(t, ch, []string{"192.0.2.1:6443", "192.0.2.2:6443"}, nil)
			if got := Active(w.Members()); len(got) != 2 {
				t.Fatalf("members %v, want only the apiservers' slice", got)
			}
		})
	}
}

func TestForeign(t *testing.T) {
	slice := func(name, ns, addrType string, labels map[string]string) *endpointSlice {
		s := &endpointSlice{AddressType: addrType}
		s.Metadata.Name, s.Metadata.Namespace, s.Metadata.Labels = name, ns, labels
		return s
	}
	own := map[string]string{"kubernetes.io/service-name": "kubernetes"}
	for _, tc := range []struct {
		s    *endpointSlice
		want bool
	}{
		{slice("kubernetes", "default", "IPv4", own), false},
		{slice("kubernetes", "", "IPv6", own), false},
		{slice("kubernetes-abcde", "default", "IPv4", own), true},
		{slice("kubernetes", "kube-system", "IPv4", own), true},
		{slice("kubernetes", "default", "IPv4", nil), true},
		{slice("kubernetes", "default", "FQDN", own), true},
		{slice("kubernetes", "default", "IPv4", map[string]string{"kubernetes.io/service-name": "kubernetes",
			"endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}), true},
	} {
		if got := tc.s.foreign() != ""; got != tc.want {
			t.Errorf("%+v: foreign %v (%q), want %v", tc.s.Metadata, got, tc.s.foreign(), tc.want)
		}
	}
}

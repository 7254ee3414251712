//go:build race || vipproxy_lockrank

package engine

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"sync"
)

// LockRankChecked: every Lock checks the lock order (the race detector's
// builds, and -tags vipproxy_lockrank).
const LockRankChecked = true

// Lock panics if the goroutine holds a lock of the same or a higher rank:
// that order, taken the other way round elsewhere, can deadlock.
func (m *Mutex[R]) Lock() {
	var r R
	heldRanks.acquire(r.rank())
	m.mu.Lock()
}

func (m *Mutex[R]) Unlock() {
	var r R
	m.mu.Unlock()
	heldRanks.release(r.rank())
}

// heldRanks are the locks each goroutine holds, by goroutine id. Debug
// builds only: the one state of the package shared across proxies,
// because a goroutine's locks may be of several.
var heldRanks = &rankTracker{by: map[uint64][]lockRank{}}

type rankTracker struct {
	mu sync.Mutex
	by map[uint64][]lockRank
}

func (t *rankTracker) acquire(r lockRank) {
	g := goroutineID()
	t.mu.Lock()
	held := t.by[g]
	for _, h := range held {
		if h >= r {
			t.mu.Unlock()
			panic(fmt.Sprintf("lock order: %v taken while holding %v (held: %v); the order is in the package doc", r, h, held))
		}
	}
	t.by[g] = append(held, r)
	t.mu.Unlock()
}

func (t *rankTracker) release(r lockRank) {
	g := goroutineID()
	t.mu.Lock()
	defer t.mu.Unlock()
	held := t.by[g]
	for i := len(held) - 1; i >= 0; i-- {
		if held[i] == r {
			held = append(held[:i], held[i+1:]...)
			if len(held) == 0 {
				delete(t.by, g)
			} else {
				t.by[g] = held
			}
			return
		}
	}
	panic(fmt.Sprintf("lock order: %v unlocked by a goroutine that did not lock it", r))
}

// goroutineID is the running goroutine's id, from its stack's header
// ("goroutine 17 [running]:").
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}

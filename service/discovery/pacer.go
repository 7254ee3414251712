package discovery

import (
	"sync"
	"time"
)

// pacer runs fn at most once per every: at once when the last run is older
// than that, else once at the end of the interval, however many calls came
// in between. fn reads the latest state itself, so calls coalesce into
// the newest: a cluster that churns ten times a second is merged (and its
// state file written) at the pace, never queued.
type pacer struct {
	every time.Duration
	fn    func()

	mu      sync.Mutex
	last    time.Time
	timer   *time.Timer
	stopped bool
}

func newPacer(every time.Duration, fn func()) *pacer {
	return &pacer{every: every, fn: fn}
}

// poke asks for a run.
func (p *pacer) poke() {
	p.mu.Lock()
	if p.stopped || p.timer != nil {
		p.mu.Unlock()
		return
	}
	wait := time.Until(p.last.Add(p.every))
	if wait > 0 {
		p.timer = time.AfterFunc(wait, p.fire)
		p.mu.Unlock()
		return
	}
	p.last = time.Now()
	p.mu.Unlock()
	p.fn()
}

func (p *pacer) fire() {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	p.timer, p.last = nil, time.Now()
	p.mu.Unlock()
	p.fn()
}

// stop ends the pacing and says whether a run was waiting.
func (p *pacer) stop() (pending bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if p.timer != nil {
		pending = p.timer.Stop()
		p.timer = nil
	}
	return pending
}

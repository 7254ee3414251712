package bench

import (
	"context"
	"slices"
	"sync"
	"time"
)

// prober is the storm client's request loop: from the mark, a new
// connection every spec.ProbeEvery, each in its own goroutine, as
// clients that open a connection per request do, so that one queued
// behind a restart does not hold back the next. Each attempt is bounded
// by attemptTimeout.
type prober struct {
	stop chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	tried  int64
	failed int64
	first  string
	took   []float64 // ms from connect to ACK, of those that worked
}

// startProbes starts the request loop (stopProbes ends it).
func (s *stormClient) startProbes(ctx context.Context) {
	p := &prober{stop: make(chan struct{})}
	s.mu.Lock()
	old := s.probes
	s.probes = p
	s.mu.Unlock()
	if old != nil {
		old.end()
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.loop(ctx, s)
	}()
}

func (p *prober) loop(ctx context.Context, s *stormClient) {
	t := time.NewTicker(s.spec.ProbeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.stop:
			return
		case <-t.C:
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.once(ctx, s)
		}()
	}
}

// once opens one new connection through the proxy, waits for its ACK
// and closes it.
func (p *prober) once(ctx context.Context, s *stormClient) {
	start := time.Now()
	c, _, _, _, err := s.open(ctx)
	took := time.Since(start)
	if err == nil {
		c.Close()
	}
	if ctx.Err() != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tried++
	if err != nil {
		p.failed++
		if p.first == "" {
			p.first = err.Error()
		}
		return
	}
	p.took = append(p.took, float64(took.Microseconds())/1e3)
}

// end stops the loop and waits for its last connection.
func (p *prober) end() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.wg.Wait()
}

// stopProbes ends the request loop, if one runs, once its last
// connection is done.
func (s *stormClient) stopProbes() {
	s.mu.Lock()
	p := s.probes
	s.mu.Unlock()
	if p != nil {
		p.end()
	}
}

// probeResult adds the request loop's figures to res.
func (s *stormClient) probeResult(res *watchResult) {
	s.mu.Lock()
	p := s.probes
	s.mu.Unlock()
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	res.Probes, res.ProbeFailed, res.ProbeFirstError = p.tried, p.failed, p.first
	if len(p.took) > 0 {
		took := slices.Sorted(slices.Values(p.took))
		res.ProbeP50ms, res.ProbeP99ms, res.ProbeMaxMs = quantile(took, 0.5), quantile(took, 0.99), took[len(took)-1]
	}
}

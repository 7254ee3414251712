// Package discovery follows the apiservers of the cluster: it lists and
// watches the `kubernetes` EndpointSlices of namespace `default` over plain
// HTTP/1.1 (no client-go), through the backends themselves rather than the
// VIP, and keeps a set of members that never goes empty on a bad answer.
// The last known set is kept on disk so that a node that restarts while
// its static seeds are gone still finds the cluster.
package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Options configure a Watcher.
type Options struct {
	Credentials Credentials
	Policy      Policy
	// Seeds are the static backends' addresses (host:port): the first ways
	// to the API, and the fallback when no member answers.
	Seeds []string
	// Resync is how long one watch lasts before the set is listed again.
	Resync time.Duration
	// StatePath keeps the last known set; "" keeps nothing.
	StatePath string
	// OnChange receives the members after each change (not concurrently).
	OnChange func([]Member)
	// OnStatus receives the status after each change of state, sync or
	// error (metrics).
	OnStatus func(Status)
	Logger   *slog.Logger
	// Timeout bounds a dial, a TLS handshake and a wait for headers.
	Timeout time.Duration
	// MaxBody bounds a list answer, MaxEvent one watch event.
	MaxBody, MaxEvent int64
	// BackoffMin and BackoffMax bound the pause between two lists; it
	// doubles at each one, and starts again from BackoffMin once no pause
	// was taken for BackoffReset (client-go's reflector: 0.8 s, 30 s, 2 min).
	BackoffMin, BackoffMax, BackoffReset time.Duration
	// Damping is the least time between two merges of the cluster's
	// answers (a churning cluster is merged at this pace, with its latest
	// answer); StateEvery, between two writes of the state file.
	Damping, StateEvery time.Duration
}

// Defaults for the Options left zero.
const (
	DefaultTimeout      = 5 * time.Second
	DefaultMaxBody      = 4 << 20
	DefaultMaxEvent     = 1 << 20
	DefaultBackoffMin   = 800 * time.Millisecond
	DefaultBackoffMax   = 30 * time.Second
	DefaultBackoffReset = 2 * time.Minute
	DefaultDamping      = time.Second
	DefaultStateEvery   = 10 * time.Second
)

// Watch states, as /status shows them.
const (
	StateStarting = "starting"
	StateListing  = "listing"
	StateWatching = "watching"
	StateBackoff  = "backing off"
	StateStopped  = "stopped"
)

// Status is the watcher's state for /status and the metrics.
type Status struct {
	State           string    `json:"state"`
	Server          string    `json:"server,omitempty"` // the address answering now
	ResourceVersion string    `json:"resource_version,omitempty"`
	LastSync        time.Time `json:"last_sync,omitzero"` // last good list
	LastError       string    `json:"last_error,omitempty"`
	LastErrorAt     time.Time `json:"last_error_at,omitzero"`
	Errors          uint64    `json:"errors"`
	Events          uint64    `json:"events"` // watch events read, bookmarks included
}

// Watcher keeps the discovered members in step with the cluster.
type Watcher struct {
	opts   Options
	log    *slog.Logger
	client client

	mu       sync.Mutex
	members  []Member
	answer   []netip.AddrPort // the last answer merged: the same again is not merged (nor logged) twice
	merged   bool             // answer is set
	pending  []netip.AddrPort // the latest answer, waiting for the merge pacer
	waiting  bool             // pending is set
	status   Status
	lastGood string
	notify   sync.Mutex // serialises OnChange

	merges, saves *pacer
}

// New returns a Watcher whose members start as the last known set on disk.
func New(opts Options) *Watcher {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.Timeout = cmpOr(opts.Timeout, DefaultTimeout)
	opts.MaxBody = cmpOr(opts.MaxBody, DefaultMaxBody)
	opts.MaxEvent = cmpOr(opts.MaxEvent, DefaultMaxEvent)
	opts.BackoffMin = cmpOr(opts.BackoffMin, DefaultBackoffMin)
	opts.BackoffMax = cmpOr(opts.BackoffMax, DefaultBackoffMax)
	opts.BackoffReset = cmpOr(opts.BackoffReset, DefaultBackoffReset)
	opts.Damping = cmpOr(opts.Damping, DefaultDamping)
	opts.StateEvery = cmpOr(opts.StateEvery, DefaultStateEvery)
	opts.Resync = cmpOr(opts.Resync, 5*time.Minute)
	log := opts.Logger.With("component", "discovery")
	w := &Watcher{opts: opts, log: log, status: Status{State: StateStarting},
		client: client{creds: opts.Credentials, timeout: opts.Timeout, maxBody: opts.MaxBody, maxEvent: opts.MaxEvent}}
	w.merges = newPacer(opts.Damping, w.mergePending)
	w.saves = newPacer(opts.StateEvery, w.saveState)
	if opts.StatePath != "" {
		addrs, err := readState(opts.StatePath)
		switch {
		case err != nil:
			log.Warn("last known set not read; starting from the static backends", "file", opts.StatePath, "err", err)
		case len(addrs) > 0:
			w.members, _ = Merge(nil, addrs, time.Now(), opts.Policy)
			for i := range w.members {
				w.members[i].Source = Remembered
			}
			log.Info("last known set read", "file", opts.StatePath, "backends", addrs)
		}
	}
	return w
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Members returns the current members.
func (w *Watcher) Members() []Member {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.members)
}

// Status returns the watch state and the last error.
func (w *Watcher) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}

// Run lists and watches until ctx ends. Errors are logged and retried;
// they never change the members. Every list follows a pause that grows
// as client-go's reflector's does: a server that closes each watch at
// once or answers 410 to each is listed less and less often.
func (w *Watcher) Run(ctx context.Context) {
	b := backoff{min: w.opts.BackoffMin, max: w.opts.BackoffMax, reset: w.opts.BackoffReset}
	for ctx.Err() == nil {
		err := w.cycle(ctx)
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			w.failed(err)
		}
		w.setState(StateBackoff, "")
		t := time.NewTimer(b.next(time.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	w.stop()
	w.setState(StateStopped, "")
}

// backoff is client-go's exponential backoff manager: each pause doubles
// up to max, with jitter to twice as long (the nodes of a cluster must not
// list in step), and starts again from min once no pause was taken for
// reset (a watch that lasted).
type backoff struct {
	min, max, reset time.Duration
	cur             time.Duration
	last            time.Time
}

func (b *backoff) next(now time.Time) time.Duration {
	if b.cur == 0 || now.Sub(b.last) > b.reset {
		b.cur = b.min
	}
	b.last = now
	d := b.cur
	b.cur = min(2*b.cur, b.max)
	return d + rand.N(d+1)
}

// stop ends the pacing: the answer waiting is merged and the state file
// written now, so that a stop loses nothing.
func (w *Watcher) stop() {
	if w.merges.stop() {
		w.mergePending()
	}
	if w.saves.stop() {
		w.saveState()
	}
}

// cycle lists through the first address that answers, then watches it.
func (w *Watcher) cycle(ctx context.Context) error {
	w.setState(StateListing, "")
	addr, v, rv, err := w.listAny(ctx)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.status.LastSync = time.Now()
	w.status.ResourceVersion = rv
	w.mu.Unlock()
	w.offer(v.union())
	w.tellStatus()
	w.setState(StateWatching, addr)
	err = w.client.watch(ctx, addr, v, rv, w.opts.Resync, func(rv string, touched bool) {
		w.mu.Lock()
		w.status.ResourceVersion = rv
		w.status.Events++
		w.mu.Unlock()
		// A bookmark or a slice rewritten as it was costs nothing more.
		if touched {
			w.offer(v.union())
		}
	})
	if errors.Is(err, errGone) {
		w.log.Info("resource version expired: listing again", "server", addr)
		return nil
	}
	return err
}

// listAny tries the address that answered last, then the seeds, then the
// members, and returns the first list.
func (w *Watcher) listAny(ctx context.Context) (string, view, string, error) {
	var errs []error
	for _, addr := range w.targets() {
		v, rv, err := w.client.list(ctx, addr)
		if err == nil {
			w.mu.Lock()
			w.lastGood = addr
			w.mu.Unlock()
			return addr, v, rv, nil
		}
		if ctx.Err() != nil {
			return "", nil, "", ctx.Err()
		}
		errs = append(errs, err)
		w.log.Debug("list failed", "server", addr, "err", err)
	}
	if len(errs) == 0 {
		return "", nil, "", errors.New("no address to reach the API through")
	}
	return "", nil, "", errors.Join(errs...)
}

func (w *Watcher) targets() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	if w.lastGood != "" {
		out = append(out, w.lastGood)
	}
	for _, s := range w.opts.Seeds {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, a := range Active(w.members) {
		if s := a.String(); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// offer hands an answer to the merge, which runs at most once per
// Damping with the latest answer.
func (w *Watcher) offer(answer []netip.AddrPort) {
	w.mu.Lock()
	w.pending, w.waiting = answer, true
	w.mu.Unlock()
	w.merges.poke()
}

func (w *Watcher) mergePending() {
	w.mu.Lock()
	answer, ok := w.pending, w.waiting
	w.pending, w.waiting = nil, false
	w.mu.Unlock()
	if ok {
		w.commit(answer)
	}
}

// commit merges one answer into the members; on a change it saves the
// active set, tells OnChange and arms the end of any new drain.
func (w *Watcher) commit(answer []netip.AddrPort) {
	w.notify.Lock()
	defer w.notify.Unlock()
	w.mu.Lock()
	if w.merged && slices.Equal(w.answer, answer) {
		w.mu.Unlock()
		return
	}
	w.answer, w.merged = answer, true
	prev := w.members
	next, notes := Merge(prev, answer, time.Now(), w.opts.Policy)
	w.members = next
	w.mu.Unlock()
	w.logNotes(notes)
	w.changed(prev, next)
}

// expire ends the drains whose grace is over.
func (w *Watcher) expire() {
	w.notify.Lock()
	defer w.notify.Unlock()
	w.mu.Lock()
	prev := w.members
	next, notes := Expire(prev, time.Now())
	w.members = next
	w.mu.Unlock()
	w.logNotes(notes)
	w.changed(prev, next)
}

func (w *Watcher) changed(prev, next []Member) {
	if slices.Equal(prev, next) {
		return
	}
	if !slices.Equal(Active(prev), Active(next)) && w.opts.StatePath != "" {
		w.saves.poke()
	}
	for _, m := range next {
		if m.Draining() && !slices.Contains(prev, m) {
			time.AfterFunc(time.Until(m.DrainUntil), w.expire)
		}
	}
	if w.opts.OnChange != nil {
		w.opts.OnChange(slices.Clone(next))
	}
}

// saveState writes the active members as they are now: the state pacer
// calls it, so that a flapping cluster costs one write (and fsync) per
// StateEvery.
func (w *Watcher) saveState() {
	active := Active(w.Members())
	if err := writeState(w.opts.StatePath, active); err != nil {
		w.log.Error("last known set not saved", "file", w.opts.StatePath, "err", err)
	}
}

func (w *Watcher) logNotes(notes []Note) {
	for _, n := range notes {
		level := slog.LevelInfo
		if n.Event == "refused" || n.Event == "kept" {
			level = slog.LevelWarn
		}
		if n.Event == "refused" {
			w.log.Log(context.Background(), level, fmt.Sprintf("discovered backends refused: %d", n.Count), "refused", n.Count, "first", n.Addr, "reason", n.Reason)
			continue
		}
		if !n.Addr.IsValid() {
			// About the answer as a whole ("kept"): no backend to name.
			w.log.Log(context.Background(), level, "discovered backends "+n.Event, "reason", n.Reason)
			continue
		}
		w.log.Log(context.Background(), level, "discovered backend "+n.Event, "backend", n.Addr, "reason", n.Reason)
	}
}

func (w *Watcher) failed(err error) {
	w.mu.Lock()
	w.status.LastError = err.Error()
	w.status.LastErrorAt = time.Now()
	w.status.Errors++
	w.mu.Unlock()
	w.log.Warn("list/watch failed; keeping the last known set", "err", err)
	w.tellStatus()
}

func (w *Watcher) setState(state, server string) {
	w.mu.Lock()
	w.status.State, w.status.Server = state, server
	w.mu.Unlock()
	w.tellStatus()
}

func (w *Watcher) tellStatus() {
	if w.opts.OnStatus != nil {
		w.opts.OnStatus(w.Status())
	}
}

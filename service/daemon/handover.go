package daemon

// Handover of established connections across a restart, through
// systemd's file descriptor store (notify.FDStore). On SIGTERM, with a
// store and a restart job stopping the unit (stopPlan: ExecStop= says
// which job, StopJobPath), the daemon stops accepting, stops every
// connection at a quiet point (proxy.Freeze: no byte held in the daemon,
// so both sockets are the connection's whole state; a client's
// half-close included), names each pair's two sockets for the pair,
// port and backend they are (pairName), packs them by the hundred into
// bundles (notify.Bundle: one store entry each, where systemd's cost
// grows with the square of its entries), stores the bundles, and exits
// at once. The next daemon finds the bundles after the listeners in
// LISTEN_FDS, takes them out of the store, unpacks them, and relays the
// pairs on. It also takes pairs stored one socket each, as daemons
// before the bundles did.
//
// Why a crash never resumes a corrupted stream: the store holds pairs
// only between a handover and the next start. A daemon stores a pair
// after freezing it, as the last thing it does with it, and the next one
// removes every pair from the store (FDSTOREREMOVE, confirmed by a
// BARRIER) before it relays a single byte on any. So a daemon killed
// (SIGKILL, OOM) while relaying leaves no pair in the store: its
// connections die with it, as any connection of a killed proxy does, and
// a pair that is in the store is one that no daemon relayed since it was
// frozen. A daemon killed halfway through a handover leaves the frozen
// pairs it stored, each complete and quiet; one whose second socket had
// not been stored yet comes back alone and is closed.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vipproxy/vipproxy/service/balance"
	"github.com/vipproxy/vipproxy/service/notify"
	"github.com/vipproxy/vipproxy/service/proxy"
)

// quietWait bounds the wait for connections to reach a quiet point: a
// busy stream gets there within one idle check (50 ms) once its peer
// reads, a connection in its replay window once its backend answers (a
// round trip). What has not by then is closed, as a drain's timeout does:
// meanwhile the frozen connections wait, and new ones queue in the
// socket's backlog, so the wait is short.
const quietWait = time.Second

// answerWait bounds the wait for a connection in its replay window, which
// is closed otherwise, failing a request about to be answered. An
// apiserver answers a TLS ClientHello in milliseconds; in TCG guests on
// a loaded host 4 of 76 new connections were still unanswered after 1 s
// (measured 2026-12-06). Five seconds keeps a client that arrived during
// the handover (it waits in the backlog) well inside client-go's 10 s
// TLS handshake timeout.
const answerWait = 5 * time.Second

// pairPrefix starts the name of every pair's socket, and bundlePrefix
// the store name of every bundle of them; the socket units' names (vip,
// a port's, admin) start with neither.
const (
	pairPrefix   = "pair."
	bundlePrefix = "pairs."
)

// Reasons a pair handed over is closed by the next daemon.
const (
	reasonBackendGone = "backend_gone" // no longer in the config, or another address
	reasonBackendDown = "backend_down"
	reasonPortGone    = "port_gone"
	reasonIncomplete  = "incomplete" // one socket of the two (POLLHUP in the store, or a cut handover)
	reasonBadName     = "bad_name"
	reasonSocket      = "socket_closed" // not a connected TCP socket any more
	reasonStore       = "store_error"
	reasonStoreFull   = "store_full"
)

// pairKey names one pair: its number, port, backend and the backend's
// address, as the handing daemon knew them.
type pairKey struct {
	n                      int
	port, backend, address string
}

// pairName is the store name (FDNAME=) of side "c" (client) or "b"
// (backend) of a pair: pair.N.SIDE.PORT.BACKEND.ADDRESS, each part
// escaped (escapeName) so that none holds '.', ':' or anything but
// printable ASCII.
func pairName(k pairKey, side string) string {
	return pairPrefix + strconv.Itoa(k.n) + "." + side + "." + escapeName(k.port) + "." + escapeName(k.backend) + "." + escapeName(k.address)
}

// parsePairName reverses pairName.
func parsePairName(name string) (pairKey, string, error) {
	f := strings.Split(strings.TrimPrefix(name, pairPrefix), ".")
	if !strings.HasPrefix(name, pairPrefix) || len(f) != 5 || (f[1] != "c" && f[1] != "b") {
		return pairKey{}, "", fmt.Errorf("%q is no pair name", name)
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return pairKey{}, "", fmt.Errorf("%q: pair number: %w", name, err)
	}
	k := pairKey{n: n}
	for i, dst := range []*string{&k.port, &k.backend, &k.address} {
		if *dst, err = unescapeName(f[2+i]); err != nil {
			return pairKey{}, "", fmt.Errorf("%q: %w", name, err)
		}
	}
	return k, f[1], nil
}

// escapeName keeps letters, digits, '_' and '-' and writes every other
// byte as %XX.
func escapeName(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func unescapeName(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("bad escape in %q", s)
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("bad escape in %q", s)
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), nil
}

// splitPairs sorts the descriptors systemd passed into what a previous
// daemon handed over (bundles, or pairs' sockets one by one) and the
// rest (the socket units').
func splitPairs(files []*os.File) (pairs, rest []*os.File) {
	for _, f := range files {
		if strings.HasPrefix(f.Name(), pairPrefix) || strings.HasPrefix(f.Name(), bundlePrefix) {
			pairs = append(pairs, f)
		} else {
			rest = append(rest, f)
		}
	}
	return pairs, rest
}

// handoverCount counts pairs by outcome and reason, for the journal,
// the metrics and the status.
type handoverCount map[string]int

func (c handoverCount) String() string {
	var parts []string
	for r, n := range c {
		parts = append(parts, fmt.Sprintf("%s=%d", r, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// frozenPair is a pair frozen on a port.
type frozenPair struct {
	port string
	pair *proxy.Pair
}

// freezeAll stops every port's connections at a quiet point, the ports
// at once, each for up to quietWait (answerWait for a connection in its
// replay window).
func (d *Daemon) freezeAll() ([]frozenPair, []*proxy.Unfrozen) {
	var mu sync.Mutex
	var frozen []frozenPair
	var rest []*proxy.Unfrozen
	var wg sync.WaitGroup
	for _, ps := range d.servers() {
		wg.Go(func() {
			d.mu.Lock()
			backends := append(ps.pool.Backends(), ps.retired...)
			d.mu.Unlock()
			pairs, unfrozen := ps.proxy.Freeze(context.Background(), backends, quietWait, answerWait)
			mu.Lock()
			defer mu.Unlock()
			for _, p := range pairs {
				frozen = append(frozen, frozenPair{ps.name, p})
			}
			rest = append(rest, unfrozen...)
		})
	}
	wg.Wait()
	return frozen, rest
}

// sayStore tells the journal, at the start, whether a restart will hand
// the connections over or drain them.
func (d *Daemon) sayStore() {
	store, why := notify.OpenFDStore(os.Getenv)
	if store == nil {
		d.log.Info("a restart drains the connections: no file descriptor store", "reason", why)
		return
	}
	defer store.Close()
	if store.Max() == 0 {
		d.log.Warn("a restart drains the connections: no file descriptor store", "reason", why)
		return
	}
	d.log.Info("a restart hands the connections over through the file descriptor store", "store_size", store.Max(), "connections", store.Max()/2)
}

// StopJobPath is where, on the control socket only, vipproxy.service's
// ExecStop=+ (`vipproxy prestop`) tells the daemon which job stops
// its unit (form value "job": "restart", "stop", ...; "" for none),
// before systemd sends SIGTERM. The answer says what the daemon will do.
const StopJobPath = "/stop-job"

// controlHandler serves h and, on the control socket alone (mode 0660,
// root's and the daemon's user's), the stop job: told on admin.listen, any
// local user could make a stop hand over and so cut every connection.
func (d *Daemon) controlHandler(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("POST "+StopJobPath, d.serveStopJob)
	return mux
}

func (d *Daemon) serveStopJob(w http.ResponseWriter, r *http.Request) {
	job := r.FormValue("job")
	if !validJobType(job) {
		http.Error(w, fmt.Sprintf("job %q: want a systemd job type (restart, stop, ...) or empty for none", job), http.StatusBadRequest)
		return
	}
	d.mu.Lock()
	d.stopJob = &job
	d.mu.Unlock()
	handOver, why := d.stopPlan()
	d.log.Info("told which job stops the unit", "job", job, "hand_over", handOver, "reason", why)
	if handOver {
		fmt.Fprintf(w, "a %s job: the daemon hands its connections over to the next start\n", job)
		return
	}
	fmt.Fprintf(w, "the daemon drains its connections: %s\n", why)
}

// validJobType takes systemd's job type names (job_type_to_string:
// lower-case words joined by '-') and "".
func validJobType(job string) bool {
	for _, c := range []byte(job) {
		if (c < 'a' || c > 'z') && c != '-' {
			return false
		}
	}
	return len(job) <= 32
}

// stopPlan is the one place that decides what SIGTERM does with the open
// connections: hand them over through the file descriptor store (true),
// or drain them, and why. It needs a store and the job that stops the
// unit as ExecStop= reported it (handOverFor).
func (d *Daemon) stopPlan() (bool, string) {
	store, why := notify.OpenFDStore(os.Getenv)
	if store == nil || store.Max() == 0 {
		if store != nil {
			store.Close()
		}
		return false, why
	}
	store.Close()
	d.mu.Lock()
	job := d.stopJob
	d.mu.Unlock()
	if job == nil {
		return false, noStopJob
	}
	return handOverFor(*job)
}

// noStopJob is why a SIGTERM that nothing announced drains. systemd
// empties the store when the unit stops, and only a restart keeps it; a
// daemon that handed over on a stop would have every connection closed
// by systemd at once, a busy transfer cut, where a drain lets it finish.
// A drain on a restart costs what a restart cost before the handover
// (watches reconnect), never a byte. So without word, drain: a kill by
// hand, a unit without the ExecStop= line, or an ExecStop= that failed.
const noStopJob = "no stop job reported before SIGTERM (vipproxy.service's ExecStop=+vipproxy prestop tells it): draining is the safe choice"

// handOverFor decides from the job stopping the unit whether to hand the
// connections over, and if not, why: systemd keeps the store across a
// restart and empties it when the unit stops, where handed-over
// connections would be closed, busy ones cut.
func handOverFor(job string) (bool, string) {
	switch job {
	case "restart", "try-restart":
		return true, ""
	case "":
		return false, "no job: the unit stops, and systemd then empties the file descriptor store"
	}
	return false, fmt.Sprintf("a %s job: systemd empties the file descriptor store when the unit stops", job)
}

// handOver passes every connection it can to the store and closes those
// that reached no quiet point. It reports false when the store failed:
// the pairs not stored are relaying again, for the drain.
func (d *Daemon) handOver(store *notify.FDStore) bool {
	open := d.openConns()
	d.notifier.Stopping(fmt.Sprintf("handing %d connections over to the next start", open))
	d.log.Info("stopping: no longer accepting, handing connections over through the file descriptor store", "open", open, "store_size", store.Max())
	d.stopAccepting()
	frozen, rest := d.freezeAll()
	closed := handoverCount{}
	for _, u := range rest {
		u.Close()
		closed[u.Reason]++
	}
	stored, left, err := storePairs(store, frozen, closed)
	if berr := store.Barrier(); berr != nil && err == nil {
		d.log.Warn("handover: systemd did not confirm the stored connections", "err", berr)
	}
	for _, p := range stored {
		p.Release()
	}
	d.countHandover("handed_over", handoverCount{"": len(stored)})
	d.countHandover("closed", closed)
	if err != nil {
		for _, p := range left {
			p.Thaw()
		}
		d.log.Warn("handover: the file descriptor store refused a connection; draining the rest", "handed_over", len(stored),
			"draining", len(left), "closed", closed.String(), "err", err)
		return false
	}
	d.log.Info("handed connections over to the next start", "handed_over", len(stored), "closed", len(frozen)+len(rest)-len(stored), "reasons", closed.String())
	return true
}

// storePairs stores the frozen pairs, both sockets of each, as many as
// the store takes, in bundles of notify.BundleMax sockets, and returns
// those it stored. A pair that cannot be (closed meanwhile, or past the
// store's size) is closed and counted in closed; a store that fails
// stops it, with the pairs left.
func storePairs(store *notify.FDStore, frozen []frozenPair, closed handoverCount) (stored, left []*proxy.Pair, err error) {
	room := store.Max() / 2
	var batch []*proxy.Pair
	var names []string
	var files []*os.File
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := storeBundle(store, bundlePrefix+strconv.Itoa(len(stored)), names, files)
		closeFiles(files)
		names, files = nil, nil
		if err != nil {
			return err // the batch is left, for the drain
		}
		stored, batch = append(stored, batch...), nil
		return nil
	}
	for i, fp := range frozen {
		if len(stored)+len(batch) >= room {
			fp.pair.Close()
			closed[reasonStoreFull]++
			continue
		}
		client, backend, ferr := fp.pair.Files()
		if ferr != nil {
			fp.pair.Close()
			closed[reasonSocket]++
			continue
		}
		k := pairKey{n: i, port: fp.port, backend: fp.pair.Backend.Name, address: fp.pair.Backend.Address}
		batch = append(batch, fp.pair)
		names = append(names, pairName(k, "c"), pairName(k, "b"))
		files = append(files, client, backend)
		if len(files)+2 <= notify.BundleMax {
			continue
		}
		if err = flush(); err != nil {
			return stored, append(batch, pairsOf(frozen[i+1:])...), err
		}
	}
	if err = flush(); err != nil {
		return stored, batch, err
	}
	return stored, nil, nil
}

// storeBundle stores the files in one bundle under name.
func storeBundle(store *notify.FDStore, name string, names []string, files []*os.File) error {
	bundle, err := notify.Bundle(names, files)
	if err != nil {
		return err
	}
	defer bundle.Close()
	return store.Store(name, bundle)
}

func pairsOf(frozen []frozenPair) []*proxy.Pair {
	pairs := make([]*proxy.Pair, len(frozen))
	for i, fp := range frozen {
		pairs[i] = fp.pair
	}
	return pairs
}

// countHandover logs nothing itself: it adds to the metrics and to the
// totals the status shows.
func (d *Daemon) countHandover(outcome string, c handoverCount) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.handover == nil {
		d.handover = map[string]handoverCount{}
	}
	if d.handover[outcome] == nil {
		d.handover[outcome] = handoverCount{}
	}
	for r, n := range c {
		d.handover[outcome][r] += n
		if d.metrics != nil && n > 0 {
			d.metrics.HandoverPairs.WithLabelValues(outcome, r).Add(uint64(n))
		}
	}
}

// resumePairs takes the pairs a previous daemon handed over: those whose
// port and backend are still served (and the backend not down) are taken
// out of the store and relayed on; the others are closed, as a drain
// would close them.
func (d *Daemon) resumePairs(passed []*os.File) {
	if len(passed) == 0 {
		return
	}
	closed := handoverCount{}
	var stored []string // the store's names, for FDSTOREREMOVE
	for _, f := range passed {
		stored = append(stored, f.Name())
	}
	ready := d.matchPairs(d.unpack(passed, closed), closed)
	store, why := notify.OpenFDStore(os.Getenv)
	if err := removePairs(store, why, stored); err != nil {
		// Relayed while still in the store, a pair would come back after
		// a crash with the bytes relayed meanwhile lost: close instead.
		d.log.Warn("cannot take handed-over connections out of the file descriptor store; closing them", "err", err)
		for _, r := range ready {
			r.close()
			closed[reasonStore]++
		}
		ready = nil
	}
	resumed := 0
	for _, r := range ready {
		if err := r.ps.proxy.Resume(r.client, r.backend, r.b); err != nil {
			d.log.Debug("a handed-over connection is closed", "backend", r.b.Name, "err", err)
			closed[reasonSocket]++
			continue
		}
		resumed++
	}
	d.countHandover("resumed", handoverCount{"": resumed})
	d.countHandover("closed", closed)
	d.log.Info("resumed the connections the previous daemon handed over", "resumed", resumed, "closed", closed.String())
}

// unpack replaces each bundle among the files passed by the sockets it
// carries. A bundle cut short is closed with what it held (counted as
// one incomplete pair: how many it held is unknown).
func (d *Daemon) unpack(passed []*os.File, closed handoverCount) []*os.File {
	var files []*os.File
	for _, f := range passed {
		if !strings.HasPrefix(f.Name(), bundlePrefix) {
			files = append(files, f)
			continue
		}
		got, err := notify.Unbundle(f)
		if err != nil {
			d.log.Warn("a bundle of handed-over connections is cut short; what it held is closed", "err", err)
			closed[reasonIncomplete]++
		}
		files = append(files, got...)
	}
	return files
}

// removePairs takes what the previous daemon stored (names: its bundles,
// or pairs' sockets one by one) out of the store and waits until systemd
// has done it.
func removePairs(store *notify.FDStore, why string, names []string) error {
	if store == nil {
		return fmt.Errorf("no file descriptor store: %s", why)
	}
	defer store.Close()
	for _, name := range names {
		if err := store.Remove(name); err != nil {
			return err
		}
	}
	return store.Barrier()
}

// readyPair is a handed-over pair whose port and backend are served.
type readyPair struct {
	ps              *portServer
	b               *balance.Backend
	client, backend *os.File
}

func (r readyPair) close() {
	r.client.Close()
	r.backend.Close()
}

// matchPairs pairs the sockets by name and finds each pair's port and
// backend; what does not match is closed and counted in closed.
func (d *Daemon) matchPairs(files []*os.File, closed handoverCount) []readyPair {
	sides := map[pairKey]*[2]*os.File{}
	var keys []pairKey
	for _, f := range files {
		k, side, err := parsePairName(f.Name())
		if err != nil {
			f.Close()
			closed[reasonBadName]++
			continue
		}
		if sides[k] == nil {
			sides[k] = new([2]*os.File)
			keys = append(keys, k)
		}
		i := map[string]int{"c": 0, "b": 1}[side]
		if sides[k][i] != nil {
			sides[k][i].Close() // the same name twice: keep the last
		}
		sides[k][i] = f
	}
	var ready []readyPair
	for _, k := range keys {
		pair := sides[k]
		r := readyPair{client: pair[0], backend: pair[1]}
		reason := d.matchPair(k, &r)
		if reason == "" {
			ready = append(ready, r)
			continue
		}
		for _, f := range pair {
			if f != nil {
				f.Close()
			}
		}
		closed[reason]++
	}
	return ready
}

// matchPair finds k's port and backend; the reason it cannot, or "".
func (d *Daemon) matchPair(k pairKey, r *readyPair) string {
	if r.client == nil || r.backend == nil {
		return reasonIncomplete
	}
	for _, ps := range d.servers() {
		if ps.name != k.port {
			continue
		}
		r.ps, r.b = ps, ps.pool.Lookup(k.backend)
		switch {
		case r.b == nil || r.b.Address != k.address:
			return reasonBackendGone
		case r.b.State() == balance.Down:
			return reasonBackendDown
		}
		return ""
	}
	return reasonPortGone
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

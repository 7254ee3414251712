package standin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EndpointSlices is the stand-in's `kubernetes` EndpointSlices in namespace
// default, answering list and watch (with bookmarks and 410 Gone) as an
// apiserver does. The test decides the endpoints: Set, SetReady, Expire.
// As the apiservers' lease reconciler writes it, the slice is named
// `kubernetes`, labelled only kubernetes.io/service-name=kubernetes, and
// holds every endpoint on the apiservers' one port. Endpoints on other
// ports (stand-ins on loopback may differ) go to slices named
// kubernetes-PORT, which no apiserver writes: discovery ignores them.
// AddForeign adds a slice someone else wrote.
type EndpointSlices struct {
	// Bookmark, if set, is the period of BOOKMARK events on a watch that
	// asked for them.
	Bookmark time.Duration

	mu      sync.Mutex
	rv      int                        // current resourceVersion
	oldest  int                        // a watch from below this gets 410
	current map[string]json.RawMessage // slice name -> object
	foreign map[string]bool            // slices AddForeign wrote
	history []sliceEvent               // events after oldest, in order
	changed chan struct{}              // closed and replaced on every change
	lists   int
	watches int
}

type sliceEvent struct {
	rv     int
	typ    string
	name   string
	object json.RawMessage
}

// maxHistory bounds the events kept for watches that resume.
const maxHistory = 1000

// SlicesPath is where the API serves the kubernetes EndpointSlices.
const SlicesPath = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"

// NewEndpointSlices returns an empty set at resourceVersion 1.
func NewEndpointSlices() *EndpointSlices {
	return &EndpointSlices{rv: 1, current: map[string]json.RawMessage{}, changed: make(chan struct{})}
}

// Endpoint is one address in the stand-in's slices.
type Endpoint struct {
	Addr netip.AddrPort
	// NotReady publishes conditions.ready = false.
	NotReady bool
}

// Set replaces the endpoints and emits the watch events that lead there.
func (e *EndpointSlices) Set(eps ...Endpoint) {
	byPort := map[uint16][]Endpoint{}
	for _, ep := range eps {
		byPort[ep.Addr.Port()] = append(byPort[ep.Addr.Port()], ep)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	next := map[string]bool{}
	ports := make([]uint16, 0, len(byPort))
	for p := range byPort {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	for _, p := range ports {
		// Named by port, so a change touches only the slices it changes.
		name := "kubernetes"
		if p != ports[0] {
			name = fmt.Sprintf("kubernetes-%d", p)
		}
		next[name] = true
		typ := "MODIFIED"
		if _, ok := e.current[name]; !ok {
			typ = "ADDED"
		}
		e.emit(typ, name, byPort[p])
	}
	for name := range e.current {
		if !next[name] && !e.foreign[name] {
			e.emit("DELETED", name, nil)
		}
	}
}

// AddForeign adds (or replaces) a slice that the apiservers did not write
// but that carries their label: anyone allowed to create EndpointSlices in
// default can. labels are added to kubernetes.io/service-name=kubernetes.
func (e *EndpointSlices) AddForeign(name string, labels map[string]string, eps ...Endpoint) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.foreign == nil {
		e.foreign = map[string]bool{}
	}
	typ := "MODIFIED"
	if _, ok := e.current[name]; !ok {
		typ = "ADDED"
	}
	e.foreign[name] = true
	e.emitLabelled(typ, name, labels, eps)
}

// SetAddrs is Set with every endpoint ready.
func (e *EndpointSlices) SetAddrs(addrs ...netip.AddrPort) {
	eps := make([]Endpoint, 0, len(addrs))
	for _, a := range addrs {
		eps = append(eps, Endpoint{Addr: a})
	}
	e.Set(eps...)
}

// Expire forgets the history: every watch open or resumed from an older
// resourceVersion gets 410 Gone and must list again.
func (e *EndpointSlices) Expire() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rv++
	e.oldest = e.rv
	e.history = nil
	e.wake()
}

// Requests says how many lists and watches were served.
func (e *EndpointSlices) Requests() (lists, watches int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lists, e.watches
}

// emit records one change; the caller holds mu.
func (e *EndpointSlices) emit(typ, name string, eps []Endpoint) {
	e.emitLabelled(typ, name, nil, eps)
}

func (e *EndpointSlices) emitLabelled(typ, name string, labels map[string]string, eps []Endpoint) {
	e.rv++
	obj := sliceObject(name, e.rv, labels, eps)
	if typ == "DELETED" {
		obj = e.current[name]
		delete(e.current, name)
	} else {
		e.current[name] = obj
	}
	e.history = append(e.history, sliceEvent{rv: e.rv, typ: typ, name: name, object: obj})
	if len(e.history) > maxHistory {
		e.oldest = e.history[0].rv + 1
		e.history = e.history[1:]
	}
	e.wake()
}

func (e *EndpointSlices) wake() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// sliceObject renders one discovery.k8s.io/v1 EndpointSlice.
func sliceObject(name string, rv int, extra map[string]string, eps []Endpoint) json.RawMessage {
	type cond struct {
		Ready bool `json:"ready"`
	}
	type endpoint struct {
		Addresses  []string `json:"addresses"`
		Conditions cond     `json:"conditions"`
	}
	family := "IPv4"
	var list []endpoint
	for _, ep := range eps {
		if ep.Addr.Addr().Is6() {
			family = "IPv6"
		}
		list = append(list, endpoint{Addresses: []string{ep.Addr.Addr().String()}, Conditions: cond{Ready: !ep.NotReady}})
	}
	var port uint16
	if len(eps) > 0 {
		port = eps[0].Addr.Port()
	}
	labels := map[string]string{"kubernetes.io/service-name": "kubernetes"}
	for k, v := range extra {
		labels[k] = v
	}
	obj := map[string]any{
		"kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
		"metadata": map[string]any{
			"name": name, "namespace": "default", "resourceVersion": strconv.Itoa(rv),
			"labels": labels,
		},
		"addressType": family,
		"endpoints":   list,
		"ports":       []map[string]any{{"name": "https", "port": port, "protocol": "TCP"}},
	}
	data, _ := json.Marshal(obj)
	return data
}

// ServeHTTP answers a list, or a watch with ?watch=1.
func (e *EndpointSlices) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != SlicesPath {
		http.NotFound(w, r)
		return
	}
	if r.URL.Query().Get("labelSelector") != "kubernetes.io/service-name=kubernetes" {
		http.Error(w, "the stand-in serves only labelSelector=kubernetes.io/service-name=kubernetes", http.StatusBadRequest)
		return
	}
	only := ""
	if fs := r.URL.Query().Get("fieldSelector"); fs != "" {
		name, ok := strings.CutPrefix(fs, "metadata.name=")
		if !ok {
			http.Error(w, "the stand-in serves only fieldSelector=metadata.name=NAME", http.StatusBadRequest)
			return
		}
		only = name
	}
	if q := r.URL.Query().Get("watch"); q == "1" || q == "true" {
		e.watch(w, r, only)
		return
	}
	e.list(w, only)
}

// selected says whether a slice is in an answer for fieldSelector
// metadata.name=only ("" selects every slice).
func selected(only, name string) bool { return only == "" || only == name }

func (e *EndpointSlices) list(w http.ResponseWriter, only string) {
	e.mu.Lock()
	e.lists++
	names := make([]string, 0, len(e.current))
	for n := range e.current {
		if selected(only, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	items := make([]json.RawMessage, 0, len(names))
	for _, n := range names {
		items = append(items, e.current[n])
	}
	rv := e.rv
	e.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"kind": "EndpointSliceList", "apiVersion": "discovery.k8s.io/v1",
		"metadata": map[string]any{"resourceVersion": strconv.Itoa(rv)}, "items": items,
	})
}

// watch streams the events after ?resourceVersion, one JSON object a line,
// until the client leaves, timeoutSeconds pass or the history expires.
func (e *EndpointSlices) watch(w http.ResponseWriter, r *http.Request, only string) {
	q := r.URL.Query()
	from, err := strconv.Atoi(q.Get("resourceVersion"))
	e.mu.Lock()
	e.watches++
	gone := err != nil || from < e.oldest
	e.mu.Unlock()
	if gone {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusGone)
		json.NewEncoder(w).Encode(goneStatus())
		return
	}
	timeout := 30 * time.Minute
	if s, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && s > 0 {
		timeout = time.Duration(s) * time.Second
	}
	end := time.NewTimer(timeout)
	defer end.Stop()
	var bookmarks <-chan time.Time
	if q.Get("allowWatchBookmarks") == "true" && e.Bookmark > 0 {
		t := time.NewTicker(e.Bookmark)
		defer t.Stop()
		bookmarks = t.C
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	for {
		pending, ch, expired := e.since(from)
		if expired {
			enc.Encode(map[string]any{"type": "ERROR", "object": goneStatus()})
			return
		}
		for _, ev := range pending {
			if selected(only, ev.name) && enc.Encode(map[string]any{"type": ev.typ, "object": ev.object}) != nil {
				return
			}
			from = ev.rv
		}
		if flusher != nil {
			flusher.Flush()
		}
		select {
		case <-ch:
		case <-r.Context().Done():
			return
		case <-end.C:
			return
		case <-bookmarks:
			enc.Encode(map[string]any{"type": "BOOKMARK", "object": map[string]any{
				"kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
				"metadata": map[string]any{"resourceVersion": strconv.Itoa(from)}}})
		}
	}
}

// since returns the events after from, the channel closed at the next
// change, and whether from has expired.
func (e *EndpointSlices) since(from int) (pending []sliceEvent, changed <-chan struct{}, expired bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ev := range e.history {
		if ev.rv > from {
			pending = append(pending, ev)
		}
	}
	return pending, e.changed, from < e.oldest
}

func goneStatus() map[string]any {
	return map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure",
		"message": "too old resource version", "reason": "Expired", "code": 410}
}

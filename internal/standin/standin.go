// Package standin is a stand-in Kubernetes apiserver for tests, the demo
// and the VM tests: an HTTPS server that requires a client certificate
// (mTLS), answers /readyz (switchable to failing), /name and a long-lived
// /watch stream, or in hang mode accepts TCP and never answers.
package standin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Options configure a Server.
type Options struct {
	// Name is returned by /name and prefixes each /watch line.
	Name string
	// Listen is host:port; port 0 picks a free port (see Addr).
	Listen string
	// TLS is the server config; it should require client certificates
	// (testpki.Files.ServerTLS does). Not needed in Hang mode.
	TLS *tls.Config
	// Hang accepts TCP connections and never answers: a wedged apiserver.
	Hang bool
	// PermitPortSharing binds with SO_REUSEPORT, as kube-apiserver
	// --permit-port-sharing=true (RKE2's recipe) does.
	PermitPortSharing bool
	// AnonymousOff serves as kube-apiserver started with
	// --anonymous-auth=false (k3s, RKE2): a client certificate is asked
	// for but neither required nor verified in the handshake; a request
	// without one that chains to TLS.ClientCAs gets 401 on every path,
	// /readyz included.
	AnonymousOff bool
	// FailFile: /readyz fails while this file exists.
	FailFile string
	// ReadyFile: /readyz fails while this file does not exist.
	ReadyFile string
	// WatchInterval is the time between two /watch lines (default 200ms).
	WatchInterval time.Duration
	// HeaderTimeout is how long a client may take for its TLS handshake
	// and request header before it is closed (default 60 s); a flood test
	// that holds raw connections for longer raises it.
	HeaderTimeout time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Slices, if set, serves the `kubernetes` EndpointSlices (list and
	// watch); several stand-ins share one, as apiservers share etcd.
	Slices *EndpointSlices
}

// Server is one stand-in apiserver.
type Server struct {
	opts        Options
	log         *slog.Logger
	ready       atomic.Bool
	readyzDelay atomic.Int64 // nanoseconds, SetReadyzDelay

	mu     sync.Mutex
	ln     net.Listener
	http   *http.Server
	hung   map[net.Conn]struct{}
	closed bool
	done   chan struct{}
}

// New returns a Server that is ready (SetReady(false) to make it fail).
func New(opts Options) (*Server, error) {
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	if opts.WatchInterval <= 0 {
		opts.WatchInterval = 200 * time.Millisecond
	}
	if opts.HeaderTimeout <= 0 {
		opts.HeaderTimeout = 60 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if !opts.Hang && opts.TLS == nil {
		return nil, errors.New("standin: a TLS config is required unless in hang mode")
	}
	s := &Server{opts: opts, log: opts.Logger.With("name", opts.Name), hung: map[net.Conn]struct{}{}, done: make(chan struct{})}
	s.ready.Store(true)
	return s, nil
}

// Start binds the listener and serves in the background until ctx ends or
// Close is called.
func (s *Server) Start(ctx context.Context) error {
	var lc net.ListenConfig
	if s.opts.PermitPortSharing {
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) })
			return errors.Join(err, serr)
		}
	}
	ln, err := lc.Listen(ctx, "tcp", s.opts.Listen)
	if err != nil {
		return fmt.Errorf("standin %s: listen %s: %w", s.opts.Name, s.opts.Listen, err)
	}
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	if s.opts.Hang {
		go s.acceptAndHang(ln)
	} else {
		srv := &http.Server{Handler: s.handler(), ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug), ReadHeaderTimeout: s.opts.HeaderTimeout}
		s.mu.Lock()
		s.http = srv
		s.mu.Unlock()
		go func() {
			if err := srv.Serve(tls.NewListener(ln, s.serverTLS())); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("serve", "err", err)
			}
		}()
	}
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-s.done:
		}
	}()
	s.log.Info("stand-in apiserver listening", "addr", ln.Addr().String(), "hang", s.opts.Hang)
	return nil
}

// Addr is the bound host:port (useful with port 0); empty before Start.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// SetReady switches /readyz between 200 and 500.
func (s *Server) SetReady(ready bool) {
	if s.ready.Swap(ready) != ready {
		s.log.Info("readyz switched", "ready", ready)
	}
}

// SetReadyzDelay makes /readyz answer only after d (0: at once), while
// everything else is served as before: an apiserver too loaded to answer
// its health check within the checker's timeout.
func (s *Server) SetReadyzDelay(d time.Duration) {
	s.readyzDelay.Store(int64(d))
}

// Ready reports whether /readyz answers 200 right now.
func (s *Server) Ready() bool {
	if !s.ready.Load() {
		return false
	}
	if s.opts.FailFile != "" && fileExists(s.opts.FailFile) {
		return false
	}
	if s.opts.ReadyFile != "" && !fileExists(s.opts.ReadyFile) {
		return false
	}
	return true
}

// Close stops the server and closes every connection, streams included.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	ln, srv := s.ln, s.http
	for c := range s.hung {
		c.Close()
	}
	s.mu.Unlock()
	var err error
	if srv != nil {
		err = srv.Close() // closes the listener too
	} else if ln != nil {
		err = ln.Close()
	}
	s.log.Info("stand-in apiserver stopped")
	return err
}

// serverTLS is Options.TLS, under AnonymousOff asking for a client
// certificate that the handler verifies, as kube-apiserver's
// authenticator does (a certificate from another CA gets 401, not a
// failed handshake).
func (s *Server) serverTLS() *tls.Config {
	if !s.opts.AnonymousOff {
		return s.opts.TLS
	}
	c := s.opts.TLS.Clone()
	c.ClientAuth = tls.RequestClientCert
	return c
}

// authenticated refuses, under AnonymousOff, a request without a client
// certificate from the client CA with the 401 kube-apiserver sends.
func (s *Server) authenticated(next http.Handler) http.Handler {
	if !s.opts.AnonymousOff {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.verifiedClient(r) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`+"\n")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) verifiedClient(r *http.Request) bool {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return false
	}
	opts := x509.VerifyOptions{Roots: s.opts.TLS.ClientCAs, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	for _, c := range r.TLS.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := r.TLS.PeerCertificates[0].Verify(opts)
	return err == nil
}

func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", s.readyz)
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("/name", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, s.opts.Name+"\n") })
	mux.HandleFunc("/watch", s.watch)
	if s.opts.Slices != nil {
		mux.Handle(SlicesPath, s.opts.Slices)
	}
	return s.authenticated(mux)
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if d := time.Duration(s.readyzDelay.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			// The client gave up (its close reached us): returning would
			// send an empty 200, which a checker still reading in that
			// instant took for a pass. Abort: no answer at all.
			panic(http.ErrAbortHandler)
		}
	}
	if !s.Ready() {
		http.Error(w, "not ready", http.StatusInternalServerError)
		return
	}
	io.WriteString(w, "ok")
}

// watch streams one line per interval until the client goes away or the
// server closes, like a Kubernetes watch.
func (s *Server) watch(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	tick := time.NewTicker(s.opts.WatchInterval)
	defer tick.Stop()
	for seq := 0; ; seq++ {
		if _, err := fmt.Fprintf(w, "%s %d\n", s.opts.Name, seq); err != nil {
			return
		}
		flusher.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-tick.C:
		}
	}
}

// acceptAndHang holds every connection open, reading nothing and writing
// nothing, until Close.
func (s *Server) acceptAndHang(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.hung[c] = struct{}{}
		s.mu.Unlock()
		s.log.Debug("accepted and hanging", "remote", c.RemoteAddr().String())
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

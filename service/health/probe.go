package health

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/httpget"
)

// Prober checks one backend address once. A nil error means healthy.
type Prober interface {
	Probe(ctx context.Context, addr string) error
}

// NewProber builds the probe configured by cfg.Type, which config.Validate
// has judged (kind, timeout, files in pairs). Files (CA, client
// certificate) are read now, so a file changed since is an error at start
// or reload, not a backend that mysteriously fails its checks.
//
// own are vipproxy's own listening addresses: a check of a backend that
// reaches one of them fails, so a name that came to resolve to the VIP
// stays down instead of passing the checks against ourselves.
func NewProber(cfg config.Health, own ...netip.AddrPort) (Prober, error) {
	build, ok := probers[cfg.Type]
	if !ok {
		return nil, fmt.Errorf("health: no prober for check kind %q", cfg.Type)
	}
	p, err := build(cfg)
	if err != nil || len(own) == 0 {
		return p, err
	}
	return &notSelf{Prober: p, own: own}, nil
}

// notSelf fails a check whose address is, or resolves to, one of own.
type notSelf struct {
	Prober
	own []netip.AddrPort
}

func (n *notSelf) Probe(ctx context.Context, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return n.Prober.Probe(ctx, addr)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return n.Prober.Probe(ctx, addr)
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host) // an IP literal comes back as itself
	if err != nil {
		return n.Prober.Probe(ctx, addr) // the probe says what is wrong with the name
	}
	for _, ip := range ips {
		if dst := netip.AddrPortFrom(ip.Unmap(), uint16(p)); slices.Contains(n.own, dst) {
			return fmt.Errorf("%s is vipproxy's own listener %s: checking it would check ourselves", addr, dst)
		}
	}
	return n.Prober.Probe(ctx, addr)
}

// probers builds each check kind's Prober. A new kind is a type here, its
// entry, and its name in config.CheckKinds; TestEveryCheckKindHasAProber
// ties the two.
var probers = map[config.CheckKind]func(config.Health) (Prober, error){
	config.CheckTCP: func(cfg config.Health) (Prober, error) {
		return &tcpProber{timeout: cfg.Timeout.Duration}, nil
	},
	config.CheckTLS: func(cfg config.Health) (Prober, error) {
		tlsConf, err := clientTLSConfig(cfg)
		if err != nil {
			return nil, err
		}
		return &tlsProber{timeout: cfg.Timeout.Duration, tls: tlsConf}, nil
	},
	config.CheckHTTPS: func(cfg config.Health) (Prober, error) {
		tlsConf, err := clientTLSConfig(cfg)
		if err != nil {
			return nil, err
		}
		return newHTTPSProber(cfg, tlsConf)
	},
}

// clientTLSConfig is the TLS side of the tls and https checks.
func clientTLSConfig(cfg config.Health) (*tls.Config, error) {
	conf := &tls.Config{ServerName: cfg.ServerName, MinVersion: tls.VersionTLS12}
	if cfg.CAFile == "" {
		// No CA configured: the check is about liveness, not identity.
		conf.InsecureSkipVerify = true
	} else {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("health: read CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("health: %s holds no PEM certificate", cfg.CAFile)
		}
		conf.RootCAs = pool
	}
	if cfg.CertFile != "" {
		pair, err := newKeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("health: load client certificate: %w", err)
		}
		conf.GetClientCertificate = pair.get
	}
	return conf, nil
}

// withServerName fills ServerName from addr when none is configured, so
// that verification (when a CA is set) checks the backend's own name/IP.
func withServerName(conf *tls.Config, addr string) *tls.Config {
	if conf.ServerName != "" {
		return conf
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return conf
	}
	c := conf.Clone()
	c.ServerName = host
	return c
}

type tcpProber struct{ timeout time.Duration }

func (p *tcpProber) Probe(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("tcp connect: %w", withTimeout(unwrapOpError(err), p.timeout))
	}
	return conn.Close()
}

type tlsProber struct {
	timeout time.Duration
	tls     *tls.Config
}

func (p *tlsProber) Probe(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	conn, err := dialTLS(ctx, addr, p.tls)
	if err != nil {
		return fmt.Errorf("tls: %w", withTimeout(err, p.timeout))
	}
	return conn.Close()
}

// dialTLS connects and completes a handshake, both bounded by ctx.
func dialTLS(ctx context.Context, addr string, conf *tls.Config) (*tls.Conn, error) {
	raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcp connect: %w", unwrapOpError(err))
	}
	conn := tls.Client(raw, withServerName(conf, addr))
	if err := conn.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, fmt.Errorf("tls handshake: %w", err)
	}
	return conn, nil
}

// httpsProber sends one GET on a connection of its own for each check
// (httpget), closed when the check ends, whatever happened.
type httpsProber struct {
	timeout      time.Duration
	path         string
	expectStatus int
	tls          *tls.Config
	// token is the bearer token (health.token_file); nil: none.
	token *token
	// credentials: the check proves who it is (config.Health.HasCredentials).
	credentials bool
}

func newHTTPSProber(cfg config.Health, tlsConf *tls.Config) (*httpsProber, error) {
	path := cfg.Path
	if path == "" {
		path = "/"
	}
	tlsConf.NextProtos = []string{"http/1.1"}
	p := &httpsProber{timeout: cfg.Timeout.Duration, path: path, expectStatus: cfg.ExpectStatus, tls: tlsConf,
		credentials: cfg.HasCredentials()}
	if cfg.TokenFile != "" {
		tok, err := newToken(cfg.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("health: read token_file: %w", err)
		}
		p.token = tok
	}
	return p, nil
}

func (p *httpsProber) Probe(ctx context.Context, addr string) error {
	if err := p.get(ctx, addr); err != nil {
		return fmt.Errorf("https GET %s: %w", p.path, withTimeout(err, p.timeout))
	}
	return nil
}

func (p *httpsProber) get(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+p.path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "vipproxy-health")
	if p.tls.ServerName != "" {
		req.Host = p.tls.ServerName // as a client using that name would send
	}
	p.authorize(req)
	conn, err := dialTLS(ctx, addr, p.tls)
	if err != nil {
		return err
	}
	resp, err := httpget.Get(ctx, conn, req, 0)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// Read a little of the body so the server sees a complete exchange.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	return p.judge(resp.StatusCode)
}

// unwrapOpError keeps "connect: connection refused" rather than the
// "dial tcp 127.0.0.1:1: ..." prefix: the event already names the backend.
func unwrapOpError(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err
	}
	return err
}

// withTimeout names the configured timeout when it is what ended a check,
// so "context deadline exceeded" does not leave the reader guessing.
func withTimeout(err error, timeout time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w (health.timeout %s)", err, timeout)
	}
	return err
}

package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/vipproxy/vipproxy/service/admin"
	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/httpget"
)

// runProbe asks the local daemon's /readyz: exit 0 iff it answers 200, so
// keepalived's track script gives up the VIP on a node whose proxy has no
// healthy backend (or is not running).
//
// It asks only the daemon's unix sockets (probeSockets), and takes an
// answer only from the daemon's own process (admin.DialDaemon: the socket's
// directory and the peer's credentials): a clash on admin.listen's port
// neither moves the VIP for nothing nor lets another program answer for a
// dead proxy, since admin.listen over TCP is never asked. Any local user
// may ask the probe socket, so keepalived's script user (NixOS runs the
// script as its own user, never as the daemon's) gets an answer whatever
// admin.listen is; root asks the control socket first, which no other
// user can reach. When no socket answers, the proxy is taken for dead.
func runProbe(ctx context.Context, env Env, args []string) int {
	var path string
	fs := newFlags(env, "probe", &path)
	daemon := readyzFlags(fs)
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for an answer")
	if code, ok := parseFlags(env, fs, args); !ok {
		return code
	}
	body, err := daemon.ask(ctx, path, *timeout)
	if err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy probe: not ready: %v\n", err)
		return ExitFailure
	}
	// /readyz already says "ready: N/M backends healthy".
	fmt.Fprintln(env.Stdout, body)
	return ExitOK
}

// readyzAsker is how probe and announce reach the local daemon's /readyz:
// its sockets (--control), then admin.listen when that is a unix socket
// (--admin).
type readyzAsker struct{ addr, control string }

// readyzFlags adds --admin and --control to fs.
func readyzFlags(fs *flag.FlagSet) *readyzAsker {
	r := &readyzAsker{}
	fs.StringVar(&r.addr, "admin", "", "admin endpoint asked when the daemon's sockets do not answer, a unix socket only (unix:/path; TCP is never asked: another program could answer there); default from the config")
	fs.StringVar(&r.control, "control", admin.DefaultProbePath(), "the daemon's socket asked first: its probe socket, or its control socket (\"\" : only the admin endpoint)")
	return r
}

// ask asks /readyz (see askReady) with the config at configPath: with the
// default --control, every socket probeSockets names, then admin.listen
// when it is a unix socket.
func (r *readyzAsker) ask(ctx context.Context, configPath string, timeout time.Duration) (string, error) {
	sockets := []string{r.control}
	if r.control == admin.DefaultProbePath() {
		sockets = probeSockets(os.Getenv, os.Geteuid() == 0)
	}
	body, err := askReady(ctx, sockets, timeout)
	if err == nil {
		return body, nil
	}
	addr := r.addr
	if addr == "" {
		cfg, cfgErr := config.Load(configPath, config.OutsideService)
		if cfgErr != nil {
			return "", errors.Join(err, cfgErr)
		}
		addr = cfg.Admin.Listen
	}
	sock, ok := strings.CutPrefix(addr, "unix:")
	switch {
	case addr == "":
		return "", err
	case !ok:
		return "", errors.Join(err, fmt.Errorf("admin endpoint %s not asked: over TCP another program could answer for a dead daemon", addr))
	}
	body, adminErr := askReady(ctx, []string{sock}, timeout)
	if adminErr != nil {
		return "", errors.Join(err, adminErr)
	}
	return body, nil
}

// askReady asks /readyz on the daemon's unix sockets in order ("" : none)
// and returns the first answer that says ready, else why not: the one
// question keepalived's track script and vipproxy announce ask. An answer
// counts only from the daemon's own process (admin.DialDaemon).
func askReady(ctx context.Context, sockets []string, timeout time.Duration) (string, error) {
	var errs error
	for _, sock := range sockets {
		if sock == "" {
			continue
		}
		body, code, err := askSocket(ctx, sock, "/readyz", timeout)
		body = strings.TrimSpace(body)
		switch {
		case err != nil:
			errs = errors.Join(errs, err)
			continue
		case code != http.StatusOK:
			return "", fmt.Errorf("/readyz answered %d: %s", code, body)
		case !strings.HasPrefix(body, "ready: "):
			return "", fmt.Errorf("/readyz answered 200 but not as vipproxy does: %q", body)
		}
		return body, nil
	}
	if errs == nil {
		errs = errors.New("no daemon socket to ask (--control \"\")")
	}
	return "", errs
}

// askSocket GETs urlPath on the daemon's unix socket sock, answered by the
// daemon's own process only. The probe socket answers as it accepts,
// without reading the request, and may close before the request is
// written: a failed write is no error, the answer is read all the same.
func askSocket(ctx context.Context, sock, urlPath string, timeout time.Duration) (string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url := "http://vipproxy" + urlPath
	conn, err := admin.DialDaemon(ctx, sock)
	if err != nil {
		return "", 0, fmt.Errorf("GET %s: %w", url, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", 0, err
	}
	req.Close = true
	req.Write(conn)
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return "", 0, fmt.Errorf("GET %s on %s: %w", url, sock, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return string(b), resp.StatusCode, nil
}

// probeSockets are the sockets the probe asks by default, in order: the
// probe socket, then the control socket (a daemon older than the probe
// socket, an upgrade not yet restarted, answers root there), each in
// $RUNTIME_DIRECTORY and at the unit's fixed path. Both: the probe runs
// inside vipproxy's unit (RUNTIME_DIRECTORY is the daemon's) but also as
// keepalived's script, which inherits keepalived's own RUNTIME_DIRECTORY
// (nixpkgs' keepalived unit has RuntimeDirectory=keepalived). Root asks
// the control sockets first: mode 0660, no other user can reach them, so
// a flood of connections on the probe socket cannot stand between root's
// probe and the daemon.
func probeSockets(getenv func(string) string, root bool) []string {
	probe := []string{admin.ProbeSocketPath(getenv), admin.DefaultProbeSocket}
	control := []string{admin.ControlSocketPath(getenv), admin.DefaultControlSocket}
	order := append(probe, control...)
	if root {
		order = append(control, probe...)
	}
	var out []string
	for _, p := range order {
		if p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// adminFlagHelp is --admin of the commands that ask the daemon through
// askDaemon.
const adminFlagHelp = "admin endpoint to ask when the daemon's sockets do not answer: unix:/path (default: admin.listen when it is one), or host:port, asked over TCP only when named here (another program could answer there for a daemon that is down)"

// askDaemon GETs urlPath from the daemon (status, reload, doctor): on its
// unix sockets in order ("" : none), then on admin.listen when that is a
// unix socket, each answer taken only from the daemon's own process
// (askSocket, admin.DialDaemon). Over TCP only at addr when the operator
// named it (--admin host:port): any local user can bind the admin port of
// a daemon that is down and answer for it, so admin.listen from the config
// is never asked over TCP. A config that cannot be loaded matters only
// when no socket answers and no --admin is given.
func askDaemon(ctx context.Context, path, addr string, sockets []string, urlPath string, timeout time.Duration) (string, int, error) {
	var errs error
	for _, sock := range sockets {
		if sock == "" {
			continue
		}
		body, code, err := askSocket(ctx, sock, urlPath, timeout)
		if err == nil {
			return body, code, nil
		}
		errs = errors.Join(errs, err)
	}
	named := addr != ""
	if !named {
		cfg, err := config.Load(path, config.OutsideService)
		if err != nil {
			return "", 0, errors.Join(errs, err)
		}
		addr = cfg.Admin.Listen
	}
	sock, isUnix := strings.CutPrefix(addr, "unix:")
	var body string
	var code int
	var err error
	switch {
	case addr == "":
		err = errors.New("no admin endpoint configured (admin.listen is empty)")
	case isUnix:
		body, code, err = askSocket(ctx, sock, urlPath, timeout)
	case !named:
		err = fmt.Errorf("admin endpoint %s not asked: over TCP another program could answer for a daemon that is down; ask it anyway with --admin %s", addr, addr)
	default:
		body, code, err = get(ctx, addr, urlPath, timeout)
	}
	if err != nil {
		return "", 0, errors.Join(errs, err)
	}
	return body, code, nil
}

func getReadyz(ctx context.Context, addr string, timeout time.Duration) (string, int, error) {
	return get(ctx, addr, "/readyz", timeout)
}

// get sends one GET for path to the admin endpoint or control socket at
// addr ("host:port" or "unix:/path") and returns the body and status.
func get(ctx context.Context, addr, path string, timeout time.Duration) (string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	network, dialAddr, host := "tcp", addr, addr
	if sock, ok := strings.CutPrefix(addr, "unix:"); ok {
		network, dialAddr, host = "unix", sock, "vipproxy"
	}
	url := "http://" + host + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", 0, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, dialAddr)
	if err != nil {
		return "", 0, fmt.Errorf("GET %s: %w", url, err)
	}
	resp, err := httpget.Get(ctx, conn, req, 0)
	if err != nil {
		return "", 0, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return string(b), resp.StatusCode, nil
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/vipproxy/vipproxy/internal/testpki"
)

// demoOptions say where the binaries are and how much to show.
type demoOptions struct {
	BinDir   string
	Out      io.Writer
	Requests int
	Keep     bool
}

// phase is what one round of requests through the proxy saw.
type phase struct {
	Counts map[string]int // backend name -> requests it answered
	Failed int
	States map[string]string // backend name -> state from /status
}

// demoResult is what the demo showed, for the test to check.
type demoResult struct {
	// Killed is right after the SIGKILL, Down once /status shows cp2 down.
	Balanced, Killed, Down, Restarted phase
}

// waitLimit bounds every wait in the demo.
const waitLimit = 15 * time.Second

var backendNames = []string{"cp1", "cp2", "cp3"}

// demo holds the running pieces; stop kills every process it started.
type demo struct {
	opts   demoOptions
	dir    string
	pki    *testpki.Files
	client *http.Client
	ports  map[string]int // backend name, "proxy", "admin" -> port
	procs  map[string]*exec.Cmd
	// reasons holds the last health check error per backend from /status.
	reasons map[string]string
}

func runDemo(ctx context.Context, opts demoOptions) (res demoResult, err error) {
	if opts.Requests <= 0 {
		opts.Requests = 30
	}
	d := &demo{opts: opts, ports: map[string]int{}, procs: map[string]*exec.Cmd{}, reasons: map[string]string{}}
	if d.dir, err = os.MkdirTemp("", "vipproxy-demo-"); err != nil {
		return res, err
	}
	defer d.stop()
	defer func() {
		if err != nil && ctx.Err() == nil {
			d.showLogs()
		}
	}()
	if err := d.setup(); err != nil {
		return res, err
	}
	d.say("vipproxy demo: 3 stand-in mTLS apiservers behind vipproxy on 127.0.0.1:%d (admin 127.0.0.1:%d)", d.ports["proxy"], d.ports["admin"])
	d.say("  pki, config and logs in %s", d.dir)
	for _, name := range backendNames {
		if err := d.startBackend(ctx, name); err != nil {
			return res, err
		}
	}
	if err := d.startProxy(ctx); err != nil {
		return res, err
	}
	if err := d.waitStates(ctx, map[string]string{"cp1": "up", "cp2": "up", "cp3": "up"}); err != nil {
		return res, err
	}

	d.say("\n[1] balancing: %d new mTLS connections through the proxy, each GET /name", opts.Requests)
	if res.Balanced, err = d.round(ctx, "all up"); err != nil {
		return res, err
	}

	d.say("\n[2] failover: SIGKILL cp2 (pid %d) and send at once; cp2 is not marked down yet,", d.procs["cp2"].Process.Pid)
	d.say("    so a dial to it fails and the connection is retried on the next backend")
	d.kill("cp2")
	if res.Killed, err = d.round(ctx, "cp2 killed"); err != nil {
		return res, err
	}
	if res.Down, err = d.roundOnceStates(ctx, map[string]string{"cp2": "down"}, "cp2 down"); err != nil {
		return res, err
	}

	d.say("\n[3] recovery: restart cp2")
	if err := d.startBackend(ctx, "cp2"); err != nil {
		return res, err
	}
	if res.Restarted, err = d.roundOnceStates(ctx, map[string]string{"cp2": "up"}, "cp2 back"); err != nil {
		return res, err
	}
	d.say("\ndone: stopping every process")
	return res, nil
}

// roundOnceStates waits until /status shows the backends in the states
// wanted, then sends a round: what the proxy does once health checks have
// seen the change.
func (d *demo) roundOnceStates(ctx context.Context, want map[string]string, label string) (phase, error) {
	if err := d.waitStates(ctx, want); err != nil {
		return phase{}, err
	}
	return d.round(ctx, label)
}

// setup writes the PKI and the config and picks free loopback ports.
func (d *demo) setup() error {
	var err error
	if d.pki, err = testpki.Write(filepath.Join(d.dir, "pki"), nil); err != nil {
		return err
	}
	conf, err := d.pki.ClientTLS()
	if err != nil {
		return err
	}
	// A new connection per request, so every request is balanced anew.
	d.client = &http.Client{Transport: &http.Transport{TLSClientConfig: conf, DisableKeepAlives: true}, Timeout: 5 * time.Second}
	for _, name := range append([]string{"proxy", "admin"}, backendNames...) {
		if d.ports[name], err = freePort(); err != nil {
			return err
		}
	}
	return os.WriteFile(d.configPath(), []byte(d.config()), 0o644)
}

func (d *demo) configPath() string { return filepath.Join(d.dir, "vipproxy.toml") }

// config is the vipproxy config: the VIP is 127.0.0.1, health checks GET
// /readyz over mTLS with the demo client certificate.
func (d *demo) config() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[vip]\naddresses = [\"127.0.0.1\"]\nport = %d\n\n", d.ports["proxy"])
	for _, name := range backendNames {
		fmt.Fprintf(&b, "[[backend]]\nname = %q\naddress = \"127.0.0.1:%d\"\n\n", name, d.ports[name])
	}
	fmt.Fprintf(&b, "[health]\ntype = \"https\"\ninterval = \"500ms\"\ntimeout = \"400ms\"\nrise = 2\nfall = 2\n")
	fmt.Fprintf(&b, "ca_file = %q\ncert_file = %q\nkey_file = %q\n\n", d.pki.CA, d.pki.ClientCert, d.pki.ClientKey)
	fmt.Fprintf(&b, "[admin]\nlisten = \"127.0.0.1:%d\"\n", d.ports["admin"])
	return b.String()
}

func (d *demo) startBackend(ctx context.Context, name string) error {
	addr := fmt.Sprintf("127.0.0.1:%d", d.ports[name])
	if err := d.start(name, filepath.Join(d.opts.BinDir, "vipproxy-apiserver"),
		"--listen", addr, "--name", name, "--cert", d.pki.ServerCert, "--key", d.pki.ServerKey, "--client-ca", d.pki.CA); err != nil {
		return err
	}
	return d.waitOK(ctx, "stand-in "+name+" ready", "https://"+addr+"/readyz")
}

func (d *demo) startProxy(ctx context.Context) error {
	if err := d.start("vipproxy", filepath.Join(d.opts.BinDir, "vipproxy"), "serve", "--config", d.configPath()); err != nil {
		return err
	}
	return d.waitOK(ctx, "vipproxy /readyz", d.adminURL("/readyz"))
}

// waitOK polls url until it answers 200 OK (a process just started is
// ready once its /readyz says so).
func (d *demo) waitOK(ctx context.Context, what, url string) error {
	return poll(ctx, what, func() error {
		resp, err := d.client.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	})
}

// start runs a child whose output goes to DIR/NAME.log. Pdeathsig kills it
// should the demo itself die without cleaning up.
func (d *demo) start(name, bin string, args ...string) error {
	logf, err := os.OpenFile(filepath.Join(d.dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	d.procs[name] = cmd
	return nil
}

func (d *demo) kill(name string) {
	if cmd := d.procs[name]; cmd != nil {
		cmd.Process.Kill()
		cmd.Wait()
		delete(d.procs, name)
	}
}

// stop ends vipproxy with SIGTERM (it drains), kills the stand-ins, and
// removes the temporary directory unless asked to keep it.
func (d *demo) stop() {
	if cmd := d.procs["vipproxy"]; cmd != nil {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		delete(d.procs, "vipproxy")
	}
	for name := range d.procs {
		d.kill(name)
	}
	if !d.opts.Keep {
		os.RemoveAll(d.dir)
	}
}

// round sends Requests new connections through the proxy and prints who
// answered.
func (d *demo) round(ctx context.Context, label string) (phase, error) {
	p := phase{Counts: map[string]int{}}
	url := fmt.Sprintf("https://127.0.0.1:%d/name", d.ports["proxy"])
	var lastErr error
	for range d.opts.Requests {
		if ctx.Err() != nil {
			return p, ctx.Err()
		}
		name, err := d.getName(url)
		if err != nil {
			p.Failed++
			lastErr = err
			continue
		}
		p.Counts[name]++
	}
	d.say("    %-10s answered by: %s   failed: %d", label, formatCounts(p.Counts), p.Failed)
	if lastErr != nil {
		d.say("    last error: %v", lastErr)
	}
	var err error
	if p.States, err = d.states(ctx); err == nil {
		d.say("    %-10s /status: %s", "", formatMap(p.States))
	}
	return p, nil
}

func (d *demo) getName(url string) (string, error) {
	resp, err := d.client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", errors.New(resp.Status)
	}
	return strings.TrimSpace(string(body)), nil
}

func (d *demo) adminURL(path string) string {
	return fmt.Sprintf("http://127.0.0.1:%d%s", d.ports["admin"], path)
}

// states reads /status from the admin endpoint: backend name -> state.
func (d *demo) states(ctx context.Context) (map[string]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.adminURL("/status"), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("/status is not JSON: %w", err)
	}
	states := map[string]string{}
	collectStates(doc, states, d.reasons)
	if len(states) == 0 {
		return nil, fmt.Errorf("/status names no backend states: %s", bytes.TrimSpace(body))
	}
	return states, nil
}

// collectStates finds the objects in /status that name a backend and its
// health, reading "state" (up/down/...) or a "healthy" boolean, and the
// last check error into reasons.
func collectStates(v any, out, reasons map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		name, _ := v["name"].(string)
		if reason, ok := v["last_error"].(string); ok && name != "" {
			reasons[name] = reason
		} else if name != "" {
			delete(reasons, name)
		}
		if state, ok := v["state"].(string); ok && name != "" {
			out[name] = strings.ToLower(state)
		} else if healthy, ok := v["healthy"].(bool); ok && name != "" {
			out[name] = map[bool]string{true: "up", false: "down"}[healthy]
		}
		for _, child := range v {
			collectStates(child, out, reasons)
		}
	case []any:
		for _, child := range v {
			collectStates(child, out, reasons)
		}
	}
}

// waitStates polls /status until every named backend is in the wanted state.
func (d *demo) waitStates(ctx context.Context, want map[string]string) error {
	start := time.Now()
	err := poll(ctx, "health "+formatMap(want), func() error {
		got, err := d.states(ctx)
		if err != nil {
			return err
		}
		for name, state := range want {
			if got[name] != state {
				return fmt.Errorf("%s is %q", name, got[name])
			}
		}
		return nil
	})
	if err == nil {
		d.say("    /status shows %s after %s", formatMap(want), time.Since(start).Round(100*time.Millisecond))
		for _, name := range sortedKeys(want) {
			if want[name] == "down" && d.reasons[name] != "" {
				d.say("    %s last check error: %s", name, d.reasons[name])
			}
		}
	}
	return err
}

// poll retries f every 100ms until it succeeds, ctx ends or waitLimit passes.
func poll(ctx context.Context, what string, f func() error) error {
	deadline := time.Now().Add(waitLimit)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wait for %s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// showLogs prints the tail of every child log after a failure.
func (d *demo) showLogs() {
	logs, _ := filepath.Glob(filepath.Join(d.dir, "*.log"))
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		d.say("--- %s (tail)\n%s", filepath.Base(l), strings.Join(lines, "\n"))
	}
}

func (d *demo) say(format string, args ...any) { fmt.Fprintf(d.opts.Out, format+"\n", args...) }

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func formatCounts(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

func formatMap(m map[string]string) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, " ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

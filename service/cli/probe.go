package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// runProbe asks the local daemon's /readyz: exit 0 iff it answers 200, so
// keepalived's track script gives up the VIP on a node whose proxy has no
// healthy backend (or is not running).
func runProbe(ctx context.Context, env Env, args []string) int {
	var path, addr string
	fs := newFlags(env, "probe", &path)
	fs.StringVar(&addr, "admin", "", "admin endpoint to ask (host:port or unix:/path); default from the config")
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for an answer")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	if addr == "" {
		cfg, ok := loadConfig(env, path)
		if !ok {
			return ExitUsage
		}
		addr = cfg.Admin.Listen
	}
	if addr == "" {
		fmt.Fprintln(env.Stderr, "vipproxy probe: no admin endpoint configured (admin.listen is empty); pass --admin")
		return ExitUsage
	}
	body, code, err := getReadyz(ctx, addr, *timeout)
	if err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy probe: not ready: %v\n", err)
		return ExitFailure
	}
	if code != http.StatusOK {
		fmt.Fprintf(env.Stderr, "vipproxy probe: not ready: /readyz answered %d: %s\n", code, strings.TrimSpace(body))
		return ExitFailure
	}
	fmt.Fprintf(env.Stdout, "ready: %s\n", strings.TrimSpace(body))
	return ExitOK
}

func getReadyz(ctx context.Context, addr string, timeout time.Duration) (string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	transport := &http.Transport{DisableKeepAlives: true}
	url := "http://" + addr + "/readyz"
	if sock, ok := strings.CutPrefix(addr, "unix:"); ok {
		transport.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}
		url = "http://vipproxy/readyz"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", 0, err
	}
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return string(b), resp.StatusCode, nil
}

package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/vipproxy/vipproxy/service/admin"
	"github.com/vipproxy/vipproxy/service/daemon"
	"github.com/vipproxy/vipproxy/service/notify"
)

// preStopTimeout bounds each question, to systemd and to the daemon:
// both answer at once, and a stop must not wait on either.
const preStopTimeout = 5 * time.Second

// runPreStop is vipproxy.service's ExecStop=+ (run as root before
// systemd's SIGTERM, on a stop and on a restart): it asks systemd which
// job stops the unit and tells the daemon on its control socket, so that
// a restart hands the connections over and a stop drains them (the daemon
// decides: daemon.StopJobPath). It exits 0 when it could not tell: the
// daemon then drains, which is always safe, and the stop goes on.
func runPreStop(ctx context.Context, env Env, args []string) int {
	var path, control, pidText, job string
	fs := newFlags(env, "prestop", &path)
	fs.StringVar(&pidText, "pid", "", "the daemon's pid (ExecStop=: $MAINPID, empty once the daemon has exited)")
	fs.StringVar(&control, "control", admin.DefaultControlPath(), "the daemon's control socket")
	fs.StringVar(&job, "job", "", "the job stopping the unit (restart, stop); default: ask systemd for the job of --pid's unit")
	if code, ok := parseFlags(env, fs, args); !ok {
		return code
	}
	if pidText == "" {
		fmt.Fprintln(env.Stdout, "vipproxy prestop: the daemon is not running: nothing to prepare")
		return ExitOK
	}
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		fmt.Fprintf(env.Stderr, "vipproxy prestop: --pid %q is not a process id (under systemd: --pid=$MAINPID)\n", pidText)
		return ExitUsage
	}
	if !flagSet(fs.Visit, "job") {
		qctx, cancel := context.WithTimeout(ctx, preStopTimeout)
		unit, jobType, err := notify.StopJob(qctx, pid)
		cancel()
		if err != nil {
			fmt.Fprintf(env.Stderr, "vipproxy prestop: cannot ask systemd which job stops the daemon (the daemon drains): %v\n", err)
			return ExitOK
		}
		job = jobType
		fmt.Fprintf(env.Stdout, "%s: job %q\n", unit, job)
	}
	answer, err := tellStopJob(ctx, control, job)
	if err != nil {
		fmt.Fprintf(env.Stderr, "vipproxy prestop: cannot tell the daemon (it drains): %v\n", err)
		return ExitOK
	}
	fmt.Fprint(env.Stdout, answer)
	return ExitOK
}

// flagSet reports whether the flag name was given (visit: FlagSet.Visit).
func flagSet(visit func(func(*flag.Flag)), name string) bool {
	found := false
	visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// tellStopJob posts the job to the daemon's control socket, the daemon's
// own (admin.DialDaemon), and returns its answer.
func tellStopJob(ctx context.Context, control, job string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, preStopTimeout)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return admin.DialDaemon(ctx, control) },
	}}
	defer client.CloseIdleConnections()
	form := url.Values{"job": {job}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://vipproxy"+daemon.StopJobPath, strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("POST %s on %s: %w", daemon.StopJobPath, control, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("POST %s on %s: %s: %s", daemon.StopJobPath, control, resp.Status, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}

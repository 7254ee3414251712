package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/vipproxy/vipproxy/service/admin"
	"github.com/vipproxy/vipproxy/service/config"
)

// checkDaemon: the daemon answers and is ready, the state in which
// keepalived's track script (`vipproxy probe`) lets this node hold the
// VIP. When it is not, the cause is named: not running, starting or
// stopping, or no healthy backend (with each backend's last error).
func checkDaemon(ctx context.Context, h Host, _ *config.Valid) Result {
	if h.Daemon == nil {
		return skip("no way to ask the daemon here")
	}
	body, code, err := h.Daemon(ctx, "/readyz")
	if err != nil {
		return fail("systemctl status vipproxy.socket vipproxy.service; journalctl -u vipproxy (doctor asks the daemon's control socket, and admin.listen when it is a unix socket; a TCP admin endpoint only when named with --admin)",
			"the daemon does not answer: %v", err)
	}
	body = strings.TrimSpace(body)
	if code == 200 {
		return pass("the daemon is %s", body)
	}
	st, err := daemonStatus(ctx, h)
	if err != nil || !st.Ready {
		return fail("wait for its first round of health checks (seconds after a start); if it lasts, journalctl -u vipproxy",
			"the daemon is not ready (%s): starting or stopping; keepalived's track script fails, so this node cannot hold the VIP", body)
	}
	return fail("make a backend pass the daemon's check: the backends check names each failure; journalctl -u vipproxy",
		"the daemon is not ready (%s): keepalived's track script fails, so this node cannot hold the VIP; %s", body, backendStates(st))
}

// backendStates lists each backend's state and last error.
func backendStates(st admin.Status) string {
	var parts []string
	for _, b := range st.Backends {
		s := fmt.Sprintf("%s (%s) %s", b.Name, b.Address, b.State)
		if b.Draining {
			s += ", draining"
		}
		if b.LastError != "" {
			s += ": " + b.LastError
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "it has no backend"
	}
	return strings.Join(parts, "; ")
}

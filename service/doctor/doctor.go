// Package doctor runs the host checks an operator needs when the VIP does
// not answer: each check passes or fails with what was seen and the fix.
// It reads only: nothing on the host is changed.
package doctor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/netcfg"
)

// Status is a check's outcome.
type Status string

// The outcomes: a warning works but needs the operator's attention (it
// does not fail doctor); a skipped check could not run here (no systemd,
// no netlink) and counts as neither.
const (
	Pass Status = "PASS"
	Warn Status = "WARN"
	Fail Status = "FAIL"
	Skip Status = "SKIP"
)

// Result is one check's outcome, what was seen and, on failure, the fix.
type Result struct {
	Check  string `json:"check"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Host is what the checks look at.
type Host struct {
	Proc    string          // /proc
	Root    string          // where the drop-ins are looked for ("/")
	Netlink *netlink.Handle // nil: link checks are skipped
	Sysctl  netcfg.Sysctl
	// KeepalivedConf: keepalived's config file; "" finds the one the
	// running keepalived reads (see Locate).
	KeepalivedConf string
	// Systemctl runs systemctl with args and returns its output; nil
	// where there is no systemd (the keepalived unit check is skipped).
	Systemctl   func(ctx context.Context, args ...string) (string, error)
	DialTimeout time.Duration
	// Install is what runs here; nil: Run asks systemd (Locate).
	Install *Install
	// Daemon GETs a path from the running daemon (its control socket,
	// else admin.listen) and returns the body and status; nil: the
	// daemon check is skipped.
	Daemon func(ctx context.Context, path string) (string, int, error)
	// Birdc runs birdc with args and returns its output; nil where there
	// is no birdc (the bgp check fails in bgp mode).
	Birdc func(ctx context.Context, args ...string) (string, error)
}

// check is one named check: run gives one result, or many one per port.
type check struct {
	name string
	run  func(ctx context.Context, h Host, cfg *config.Valid) Result
	many func(ctx context.Context, h Host, cfg *config.Valid) []Result
}

// Checks are the names of every check, in the order they run.
func Checks() []string {
	var out []string
	for _, c := range checks() {
		out = append(out, c.name)
	}
	return out
}

func checks() []check {
	return []check{
		{"vip-port", checkVIPPort, nil},
		{"vip-link", checkVIPLink, nil},
		{"arp", checkARP, nil},
		{"drop-ins", checkDropIns, nil},
		{"listeners", nil, checkListeners},
		{"networkd-foreign", checkNetworkdForeign, nil},
		{"keepalived", checkKeepalived, nil},
		{"bgp", checkBGP, nil},
		{"daemon", checkDaemon, nil},
		{"backends", nil, checkBackends},
		{"vip-answers", nil, checkVIPAnswers},
		{"localnet", checkRouteLocalnet, nil},
		{"discovery", checkDiscovery, nil},
		{"credentials", checkCredentials, nil},
	}
}

// Run runs the checks named in only (all when empty) against cfg.
func Run(ctx context.Context, h Host, cfg *config.Valid, only []string) ([]Result, error) {
	for _, name := range only {
		if !slices.Contains(Checks(), name) {
			return nil, fmt.Errorf("unknown check %q (checks: %s)", name, strings.Join(Checks(), ", "))
		}
	}
	if h.Install == nil {
		in := Locate(ctx, h)
		h.Install = &in
	}
	var out []Result
	for _, c := range checks() {
		if len(only) > 0 && !slices.Contains(only, c.name) {
			continue
		}
		var rs []Result
		if c.many != nil {
			rs = c.many(ctx, h, cfg)
		} else {
			rs = []Result{c.run(ctx, h, cfg)}
		}
		for _, r := range rs {
			r.Check = c.name
			out = append(out, r)
		}
	}
	return out, nil
}

// Failed reports whether any result failed.
func Failed(rs []Result) bool {
	return slices.ContainsFunc(rs, func(r Result) bool { return r.Status == Fail })
}

func pass(format string, args ...any) Result {
	return Result{Status: Pass, Detail: fmt.Sprintf(format, args...)}
}

func warn(fix, format string, args ...any) Result {
	return Result{Status: Warn, Detail: fmt.Sprintf(format, args...), Fix: fix}
}

func fail(fix, format string, args ...any) Result {
	return Result{Status: Fail, Detail: fmt.Sprintf(format, args...), Fix: fix}
}

func skip(format string, args ...any) Result {
	return Result{Status: Skip, Detail: fmt.Sprintf(format, args...)}
}

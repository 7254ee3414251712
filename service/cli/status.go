package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vipproxy/vipproxy/service/admin"
	"github.com/vipproxy/vipproxy/service/announce"
	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/discovery"
	"github.com/vipproxy/vipproxy/service/health"
	"github.com/vipproxy/vipproxy/service/netcfg"
)

// statusReport is what `vipproxy status` shows: the daemon's /status and
// what only the host knows (who holds the VIP, keepalived's unit).
type statusReport struct {
	Daemon    *admin.Status `json:"daemon"`
	DaemonErr string        `json:"daemon_error,omitempty"`
	Ready     bool          `json:"ready"`
	VIP       []vipHolding  `json:"vip,omitempty"`
	// Mode is vip.mode; with "node-local" VIP and Keepalived stay empty.
	Mode       string   `json:"mode,omitempty"`
	NodeLocal  []string `json:"node_local,omitempty"`
	Keepalived string   `json:"keepalived,omitempty"`
	// BGP is the announcement, with vip.mode = "bgp".
	BGP *bgpAnnouncement `json:"bgp,omitempty"`
}

// bgpAnnouncement says whether the announce link holds the VIPs (what
// BIRD exports; vipproxy_bgp_announced).
type bgpAnnouncement struct {
	Interface string `json:"interface"`
	Announced bool   `json:"announced"`
	Error     string `json:"error,omitempty"`
}

// vipHolding says whether this node holds a VIP, and on which link (see
// netcfg.HeldVIPs: the answer vipproxy_vip_held gives too).
type vipHolding struct {
	Address string `json:"address"` // at the first port
	// Ports are every port the VIP serves.
	Ports     []uint16 `json:"ports"`
	Interface string   `json:"interface,omitempty"`
	Held      bool     `json:"held"`
}

// runStatus prints the daemon's state for a person (or --json): exit 0
// when ready, 1 when not ready or unreachable.
func runStatus(ctx context.Context, env Env, args []string) int {
	var path, addr, control string
	var asJSON bool
	fs := newFlags(env, "status", &path)
	fs.StringVar(&control, "control", admin.DefaultControlPath(), "the daemon's control socket, asked first")
	fs.StringVar(&addr, "admin", "", adminFlagHelp)
	fs.BoolVar(&asJSON, "json", false, "print JSON for scripts")
	if code, ok := parseFlags(env, fs, args); !ok {
		return code
	}
	var rep statusReport
	if st, err := daemonStatus(ctx, path, addr, control); err != nil {
		rep.DaemonErr = err.Error()
	} else {
		rep.Daemon = &st
		rep.Ready, _, _ = st.Readiness()
	}
	cfg, err := config.Load(path, config.OutsideService)
	if err == nil {
		rep.Mode = cfg.VIP.Mode.String()
		switch {
		case cfg.VIP.Mode.UsesKeepalived():
			rep.VIP = vipHoldings(cfg)
		case cfg.VIP.Mode.UsesBGP():
			rep.BGP = announcement(cfg)
		default:
			rep.NodeLocal = nodeLocalVIPs(cfg)
		}
	}
	if sc := systemctl(); sc != nil && (err != nil || cfg.VIP.Mode.UsesKeepalived()) {
		out, _ := sc(ctx, "is-active", "keepalived.service")
		rep.Keepalived = strings.TrimSpace(out)
	}
	if asJSON {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintf(env.Stdout, "%s\n", b)
	} else {
		printStatus(env.Stdout, rep, time.Now())
	}
	if !rep.Ready {
		return ExitFailure
	}
	return ExitOK
}

// vipHoldings says for each VIP whether this node holds it; nothing when
// netlink cannot answer.
func vipHoldings(cfg *config.Valid) []vipHolding {
	held, err := netcfg.HeldVIPsHere(cfg.Network.Interface, cfg.VIP.Addresses)
	if err != nil {
		return nil
	}
	var ports []uint16
	for _, p := range cfg.ServedPorts() {
		ports = append(ports, p.Port)
	}
	var out []vipHolding
	for _, v := range cfg.VIP.Addresses {
		out = append(out, vipHolding{Address: netip.AddrPortFrom(v, ports[0]).String(), Ports: ports, Interface: held[v], Held: held[v] != ""})
	}
	return out
}

func announcement(cfg *config.Valid) *bgpAnnouncement {
	on, err := announce.Announced(cfg.BGP.Interface, cfg.VIP.Addresses)
	a := &bgpAnnouncement{Interface: cfg.BGP.Interface, Announced: on}
	if err != nil {
		a.Error = err.Error()
	}
	return a
}

// nodeLocalVIPs are the listeners of a node-local VIP: every address on
// every port.
func nodeLocalVIPs(cfg *config.Valid) []string {
	var out []string
	for _, p := range cfg.ServedPorts() {
		for _, a := range cfg.VIP.Addresses {
			out = append(out, netip.AddrPortFrom(a, p.Port).String())
		}
	}
	return out
}

func printStatus(w io.Writer, rep statusReport, now time.Time) {
	if rep.Daemon == nil {
		fmt.Fprintf(w, "daemon: not reachable: %s\n", rep.DaemonErr)
	} else {
		printDaemon(w, *rep.Daemon, rep.Ready, now)
	}
	for _, v := range rep.VIP {
		addr := v.Address
		if ap, err := netip.ParseAddrPort(addr); err == nil && len(v.Ports) > 1 {
			addr = fmt.Sprintf("%s (ports %s)", ap.Addr(), joinPorts(v.Ports))
		}
		if v.Held {
			fmt.Fprintf(w, "VIP %s: held by this node on %s (VRRP master)\n", addr, v.Interface)
		} else {
			fmt.Fprintf(w, "VIP %s: not held by this node (not the VRRP master)\n", addr)
		}
	}
	for _, v := range rep.NodeLocal {
		fmt.Fprintf(w, "VIP %s: node-local (loopback of this node, no VRRP)\n", v)
	}
	if b := rep.BGP; b != nil {
		switch {
		case b.Error != "":
			fmt.Fprintf(w, "VIP announced by BGP: unknown: %s\n", b.Error)
		case b.Announced:
			fmt.Fprintf(w, "VIP announced by BGP: yes, on %s (vipproxy-announce; birdc show protocols for the sessions)\n", b.Interface)
		default:
			fmt.Fprintf(w, "VIP announced by BGP: no: %s holds no VIP (proxy not ready, or vipproxy-announce not running)\n", b.Interface)
		}
	}
	if rep.Keepalived != "" {
		fmt.Fprintf(w, "keepalived.service: %s\n", rep.Keepalived)
	}
}

func printDaemon(w io.Writer, st admin.Status, ready bool, now time.Time) {
	state := "not ready"
	if ready {
		state = "ready"
	}
	fmt.Fprintf(w, "vipproxy %s: %s, %s backends healthy, %d connections open\n",
		st.Version, state, st.Summary(), st.OpenConnections)
	switch {
	case st.ConfigError != "":
		fmt.Fprintf(w, "config %s; last reload refused, the previous config serves: %s\n", st.ConfigPath, st.ConfigError)
	case st.Reloads == 0:
		fmt.Fprintf(w, "config %s; loaded %s, no reload since\n", st.ConfigPath, ago(st.LastReload, now))
	default:
		fmt.Fprintf(w, "config %s; last reload %s: ok\n", st.ConfigPath, ago(st.LastReload, now))
	}
	printDiscovery(w, st.Discovery, now)
	if h := st.Handover; h != nil {
		fmt.Fprintf(w, "restart: %d connections resumed from the previous daemon, %d closed%s\n", h.Resumed, total(h.Closed), reasons(h.Closed))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tPORT\tADDRESS\tSOURCE\tSTATE\tSINCE\tCONNS\tLAST CHECK ERROR")
	unverified := 0
	for _, b := range st.Backends {
		s := b.State.String()
		if b.Unverified != "" {
			s += " (unverified)"
			unverified++
		}
		if b.Draining {
			s += " (draining)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", b.Name, b.Port, b.Address, b.Source, s, ago(b.LastChange, now), b.OpenConnections, b.LastError)
	}
	tw.Flush()
	if unverified > 0 {
		fmt.Fprintf(w, "readiness of %d backend(s) unverified: they refuse a check without credentials (anonymous auth off), so the check only sees them answer; fix: %s\n",
			unverified, health.UnverifiedFix)
	}
}

// printDiscovery says how the EndpointSlice watch stands, if it runs.
func printDiscovery(w io.Writer, d *discovery.Status, now time.Time) {
	if d == nil {
		return
	}
	fmt.Fprintf(w, "discovery: %s", d.State)
	if d.Server != "" {
		fmt.Fprintf(w, " through %s", d.Server)
	}
	fmt.Fprintf(w, ", last list %s", ago(d.LastSync, now))
	if d.LastError != "" {
		fmt.Fprintf(w, "; last error %s: %s", ago(d.LastErrorAt, now), d.LastError)
	}
	fmt.Fprintln(w)
}

// ago is "15:04:05 (3m ago)", or "-" for a zero time.
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return fmt.Sprintf("%s (%s ago)", t.Local().Format("15:04:05"), now.Sub(t).Round(time.Second))
}

func joinPorts(ports []uint16) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, ", ")
}

// total sums counts by reason.
func total(by map[string]int) (n int) {
	for _, c := range by {
		n += c
	}
	return n
}

// reasons lists counts by reason, sorted: " (backend_gone 2, busy 1)".
func reasons(by map[string]int) string {
	var parts []string
	for r, c := range by {
		parts = append(parts, fmt.Sprintf("%s %d", r, c))
	}
	if len(parts) == 0 {
		return ""
	}
	slices.Sort(parts)
	return " (" + strings.Join(parts, ", ") + ")"
}

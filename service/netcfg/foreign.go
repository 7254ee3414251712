package netcfg

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vipproxy/vipproxy/service/config"
)

// Foreign is what the operator's systemd-networkd would delete the next
// time it configures a link (`networkctl reload`, its restart, a link
// coming up): routing policy rules and routes it did not make, while
// networkd.conf leaves ManageForeign* at yes. networkd 252 deletes every
// rule but the kernel's (global, whatever links it manages) and, on each
// link a .network file matches and for routes on no link (a blackhole),
// every route but the kernel's and those its .network files configure
// (measured in vm-tests/neighbours.py: Cilium's fwmark rule, BIRD's
// routes and a proto static route on a netplan-style eth1 went at a
// reload).
type Foreign struct {
	Policy   ForeignPolicy
	Networks []string // the operator's .network files
	Rules    []string // rules networkd did not make, described
	Routes   []string // routes networkd did not make on its links, described
}

// AtRisk lists what networkd would delete now under its policy.
func (f Foreign) AtRisk() []string {
	var out []string
	if f.Policy.Rules {
		out = append(out, f.Rules...)
	}
	if f.Policy.Routes {
		out = append(out, f.Routes...)
	}
	return out
}

// ForeignFixFile is the networkd.conf drop-in the fix names.
const ForeignFixFile = "/etc/systemd/networkd.conf.d/60-foreign.conf"

// ForeignFix is how the operator spares those rules and routes, or
// accepts their deletion.
// networkd reads networkd.conf at start only, and its restart on a
// netplan-style node, even with the drop-in, dropped the routes via the
// uplink it manages once (measured in vm-tests/networkd-foreign.py,
// networkd 252: the rules and a blackhole stayed): the fix says so.
var ForeignFix = fmt.Sprintf("printf '[Network]\\n%s\\n' > %s; then systemctl restart systemd-networkd, or reboot "+
	"(networkd reads networkd.conf at start only; its restart drops the routes via the links it manages once: "+
	"restart the routing daemon or CNI that adds them after it); "+
	"or, to let networkd delete them at each reconfiguration, set network.allow_foreign_cleanup = true in the config",
	strings.Join(foreignSettingLines(), "\\n"), ForeignFixFile)

func foreignSettingLines() []string {
	var out []string
	for _, s := range ForeignSettings {
		out = append(out, s.Name+"="+s.Value)
	}
	return out
}

// FindForeign looks at the live rules and routes for what the operator's
// networkd would delete. Without an operator .network file networkd runs
// for vipproxy's link alone, under the drop-in apply writes: nothing to
// find.
func FindForeign(nl *netlink.Handle, cfg *config.Valid, root string) (Foreign, error) {
	var f Foreign
	others, err := OtherNetworks(cfg, root)
	if err != nil || len(others) == 0 {
		return f, err
	}
	f.Networks = others
	if f.Policy, err = ReadForeignPolicy(root); err != nil {
		return f, err
	}
	nets, err := readNetworks(root, others)
	if err != nil {
		return f, err
	}
	rules, err := Rules(nl)
	if err != nil {
		return f, err
	}
	for _, r := range rules {
		if foreignRule(r, nets) {
			f.Rules = append(f.Rules, describeRule(r))
		}
	}
	links, err := nl.LinkList()
	if err != nil {
		return f, fmt.Errorf("list links: %w", err)
	}
	routes, err := Routes(nl)
	if err != nil {
		return f, err
	}
	for _, r := range routes {
		if foreignRoute(r, links, nets, cfg.Network.Interface) {
			f.Routes = append(f.Routes, describeRoute(r, links))
		}
	}
	return f, nil
}

// foreignRule: every rule but the kernel's own (protocol kernel: its three defaults, the
// VRF rule) and, where a .network file has [RoutingPolicyRule] sections,
// those of networkd's protocol, static.
func foreignRule(r Rule, nets []networkFile) bool {
	if r.Protocol == unix.RTPROT_KERNEL {
		return false
	}
	return !(r.Protocol == unix.RTPROT_STATIC && slices.ContainsFunc(nets, func(n networkFile) bool { return n.rules }))
}

// foreignRoute: a route on a link networkd manages, or on no link, that
// neither the kernel (proto kernel; IPv6 multicast of proto boot) nor
// networkd made (its DHCP and RA routes; proto static to a destination its
// .network files name, or kept by KeepConfiguration=).
func foreignRoute(r Route, links []netlink.Link, nets []networkFile, ours string) bool {
	switch {
	case r.Protocol == unix.RTPROT_KERNEL || r.Protocol == unix.RTPROT_DHCP || r.Protocol == unix.RTPROT_RA:
		return false
	case r.Protocol == unix.RTPROT_BOOT && r.Dst == netip.MustParsePrefix("ff00::/8"):
		return false
	}
	var managing []networkFile // the .network file of each link the route uses
	for _, idx := range r.LinkIndexes {
		i := slices.IndexFunc(links, func(l netlink.Link) bool { return l.Attrs().Index == idx })
		if i < 0 || links[i].Attrs().Name == ours {
			return false
		}
		n, ok := matchNetwork(nets, links[i].Attrs().Name)
		if !ok || n.unmanaged {
			return false // networkd leaves that link alone
		}
		managing = append(managing, n)
	}
	if len(r.LinkIndexes) == 0 {
		managing = nets // a route on no link: networkd's if any file names it
	}
	if r.Protocol == unix.RTPROT_STATIC {
		return !slices.ContainsFunc(managing, func(n networkFile) bool { return n.keepStatic || slices.Contains(n.routes, r.Dst) })
	}
	return true
}

// networkFile is what foreignRoute needs of an operator's .network file.
type networkFile struct {
	path       string
	names      []string // [Match] Name= globs; empty: no Name= (matches any)
	negate     bool     // Name=!...
	unmanaged  bool     // [Link] Unmanaged=yes
	keepStatic bool     // KeepConfiguration=static or yes
	rules      bool     // has [RoutingPolicyRule]
	routes     []netip.Prefix
}

// readNetworks reads the files in networkd's order (by file name; the
// first that matches a link configures it), each with its drop-ins.
func readNetworks(root string, paths []string) ([]networkFile, error) {
	sorted := slices.Clone(paths)
	slices.SortStableFunc(sorted, func(a, b string) int { return strings.Compare(filepath.Base(a), filepath.Base(b)) })
	var out []networkFile
	for _, p := range sorted {
		n, err := readNetwork(root, p)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// readNetwork reads a .network file and then its drop-ins,
// NAME.network.d/*.conf in any of networkd's directories, as networkd
// merges them: a Gateway= an operator keeps in a drop-in makes the default
// route networkd's own.
func readNetwork(root, path string) (networkFile, error) {
	const what = "the operator's networkd files"
	n := networkFile{path: path}
	more, err := dropIns(root, networkdDirs, filepath.Base(path)+".d")
	if err != nil {
		return n, fmt.Errorf("read %s: %w", what, err)
	}
	for _, p := range append([]string{path}, more...) {
		opts, err := readOptions(p, what)
		if err != nil {
			return n, err
		}
		for _, o := range opts {
			n.apply(o)
		}
	}
	return n, nil
}

// networkdDirs are the directories networkd reads .network files and
// their drop-ins from, the highest precedence first (systemd.network(5)).
var networkdDirs = []string{"/etc/systemd/network", "/run/systemd/network", "/usr/local/lib/systemd/network", "/usr/lib/systemd/network"}

// apply reads one setting of a .network file. A Gateway= (in [Network]
// or [Route] without Destination=) is networkd's default route.
func (n *networkFile) apply(o *unit.UnitOption) {
	v := strings.TrimSpace(o.Value)
	switch o.Section + "." + o.Name {
	case "Match.Name":
		for _, g := range strings.Fields(v) {
			if rest, ok := strings.CutPrefix(g, "!"); ok {
				n.negate, g = true, rest
			}
			n.names = append(n.names, g)
		}
	case "Link.Unmanaged":
		n.unmanaged, _ = systemdBool(v)
	case "Network.KeepConfiguration":
		n.keepStatic = v == "static" || v == "yes"
	case "Network.Gateway", "Route.Gateway":
		n.routes = append(n.routes, netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0"))
	case "Route.Destination":
		if p, err := netip.ParsePrefix(v); err == nil {
			n.routes = append(n.routes, p.Masked())
		} else if a, err := netip.ParseAddr(v); err == nil {
			n.routes = append(n.routes, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	if o.Section == "RoutingPolicyRule" {
		n.rules = true
	}
}

// matchNetwork finds the first file whose [Match] Name= takes the link.
// Match keys other than Name= (MACAddress=, Type=, Driver=...) are not
// judged: a file is taken to match, so a doubt reports a rule or route at
// risk rather than miss one.
func matchNetwork(nets []networkFile, link string) (networkFile, bool) {
	for _, n := range nets {
		if len(n.names) == 0 {
			return n, true
		}
		hit := slices.ContainsFunc(n.names, func(g string) bool { ok, _ := filepath.Match(g, link); return ok })
		if hit != n.negate {
			return n, true
		}
	}
	return networkFile{}, false
}

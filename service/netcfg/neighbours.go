package netcfg

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/vipproxy/vipproxy/service/atomicfile"
	"github.com/vipproxy/vipproxy/service/config"
)

// NetworkdConfName is the networkd.conf drop-in apply writes where
// systemd-networkd runs for vipproxy alone.
const NetworkdConfName = "60-vipproxy.conf"

// ForeignSettings are the networkd.conf [Network] settings of that
// drop-in (nix/lib.nix sets the same through systemd.network.config).
// networkd's defaults (yes) delete every routing policy rule, and every
// route on a link it configures, that no .network file names: a CNI's
// `ip rule`s (Cilium's fwmark 0x200/0xf00 lookup 2004) went as soon as
// networkd configured dummyvip0 (measured in vm-tests/neighbours.py,
// networkd 252; cilium/cilium#18706, flatcar/Flatcar#620). networkd.conf
// is read at start only, so a changed drop-in needs a networkd restart.
var ForeignSettings = []struct{ Name, Value string }{
	{"ManageForeignRoutingPolicyRules", "no"},
	{"ManageForeignRoutes", "no"},
}

// NetworkdConf is that drop-in: networkd.conf.d beside the networkd
// directory of the config (/etc/systemd/networkd.conf.d for
// /etc/systemd/network), under root.
func NetworkdConf(cfg *config.Valid, root string) atomicfile.File {
	dir := filepath.Join(rootOr(root), filepath.Dir(cfg.Network.NetworkdDir), "networkd.conf.d")
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("# systemd-networkd runs here for vipproxy's dummy link alone: it must not\n")
	b.WriteString("# delete the rules and routes of the CNI, BIRD or ifupdown.\n[Network]\n")
	for _, s := range ForeignSettings {
		fmt.Fprintf(&b, "%s=%s\n", s.Name, s.Value)
	}
	return atomicfile.File{Path: filepath.Join(dir, NetworkdConfName), Data: []byte(b.String()), Perm: 0o644}
}

// operatorNetworkDirs are where an operator's (or netplan's) .network
// files live; /usr/lib/systemd/network holds only the distribution's
// examples for containers, which match no node link.
var operatorNetworkDirs = []string{"/etc/systemd/network", "/run/systemd/network", "/usr/local/lib/systemd/network"}

// OtherNetworks lists the .network files under root that are not
// vipproxy's: where there are any, networkd is the operator's tool and its
// networkd.conf their choice.
func OtherNetworks(cfg *config.Valid, root string) ([]string, error) {
	ours := filepath.Join(rootOr(root), cfg.Network.NetworkdDir, cfg.Network.NetworkFile)
	dirs := append(slices.Clone(operatorNetworkDirs), cfg.Network.NetworkdDir)
	seen := map[string]bool{}
	var others []string
	for _, d := range dirs {
		dir := filepath.Join(rootOr(root), d)
		if seen[dir] {
			continue
		}
		seen[dir] = true
		entries, err := os.ReadDir(dir)
		if err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("list %s: %w", dir, err)
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			if strings.HasSuffix(e.Name(), ".network") && p != ours {
				others = append(others, p)
			}
		}
	}
	return others, nil
}

// neighbourFiles returns the networkd.conf drop-in to write with the other
// files when networkd runs for vipproxy alone, or a note saying why not.
// Where the operator's networkd would delete rules or routes that exist
// now, it refuses (ForeignError) unless network.allow_foreign_cleanup
// accepts that: before any file is written or networkd reloaded.
func neighbourFiles(nl *netlink.Handle, cfg *config.Valid, opts Options) ([]atomicfile.File, string, error) {
	if opts.Netlink {
		return nil, "", nil // networkd plays no part
	}
	others, err := OtherNetworks(cfg, opts.Root)
	if err != nil {
		return nil, "", err
	}
	if len(others) == 0 {
		return []atomicfile.File{NetworkdConf(cfg, opts.Root)}, "", nil
	}
	f, err := FindForeign(nl, cfg, opts.Root)
	if err != nil {
		return nil, "", fmt.Errorf("look for the rules and routes networkd would delete: %w", err)
	}
	mine := fmt.Sprintf("systemd-networkd also manages this node's own links (%s): its networkd.conf stays yours", strings.Join(others, ", "))
	switch risk := f.AtRisk(); {
	case len(risk) > 0 && !cfg.Network.AllowForeignCleanup:
		return nil, "", &ForeignError{File: cfg.Path, Networks: others, AtRisk: risk}
	case len(risk) > 0:
		return nil, fmt.Sprintf("%s; network.allow_foreign_cleanup = true: networkd deletes %s", mine, strings.Join(risk, "; ")), nil
	case f.Policy.Rules || f.Policy.Routes:
		return nil, fmt.Sprintf("%s; with a CNI or a routing daemon set %s in a networkd.conf.d drop-in, or networkd deletes their rules and routes", mine, foreignSettingsText()), nil
	}
	return nil, "", nil
}

// ForeignError is apply's refusal: the operator's networkd would delete
// these rules and routes at the reload.
type ForeignError struct {
	File     string   // the config
	Networks []string // the operator's .network files
	AtRisk   []string
}

func (e *ForeignError) Error() string {
	return fmt.Sprintf("not reloading systemd-networkd: it manages this node's own links (%s) with ManageForeignRoutingPolicyRules=/ManageForeignRoutes= at yes "+
		"and would delete %d rule(s) and route(s) it did not make: %s. Fix: %s (%s: network.allow_foreign_cleanup)",
		strings.Join(e.Networks, ", "), len(e.AtRisk), strings.Join(e.AtRisk, "; "), ForeignFix, e.File)
}

func foreignSettingsText() string {
	var parts []string
	for _, s := range ForeignSettings {
		parts = append(parts, s.Name+"="+s.Value)
	}
	return strings.Join(parts, " and ")
}

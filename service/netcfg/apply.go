package netcfg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vipproxy/vipproxy/service/atomicfile"
	"github.com/vipproxy/vipproxy/service/config"
)

// Host is the machine (or network namespace) being set up.
type Host struct {
	Netlink  *netlink.Handle // the namespace to act in
	Sysctl   Sysctl          // /proc/sys of the same namespace
	Reloader Reloader        // systemd-networkd; unused with Options.Netlink
	// Write replaces one file atomically; nil means atomicfile.Write.
	Write atomicfile.WriteFunc
}

// Options tune Apply and Remove.
type Options struct {
	// Root prefixes every file path ("" or "/" for the real system).
	Root string
	// Netlink creates the link and addresses directly instead of relying on
	// systemd-networkd (which then need not run).
	Netlink bool
	// Wait bounds how long Apply polls for the link to come up after a reload.
	Wait time.Duration
}

// Result is what Apply did and what verification found.
type Result struct {
	Changed   []string // files written
	Reloaded  bool     // networkd was asked to reload
	Restarted bool     // networkd was restarted (its networkd.conf.d drop-in changed)
	Sysctls   []string // sysctls changed, as "key=value"
	Problems  []string // verification failures, one per line; empty on success
	Notes     []string // what the operator should know, one per line
}

// Apply checks the input against the live host, writes the files (atomic,
// unchanged ones untouched, all or nothing), reloads networkd only when a
// file changed or the live state is wrong, sets the uplink sysctls at once
// and verifies, polling up to opts.Wait. Bad input returns an error before
// anything is written.
func (h Host) Apply(ctx context.Context, cfg *config.Valid, opts Options) (Result, error) {
	var res Result
	files := Render(cfg, opts.Root).List()
	if err := h.preflight(ctx, cfg, opts); err != nil {
		return res, err
	}
	conf, note, err := neighbourFiles(h.Netlink, cfg, opts)
	if err != nil {
		return res, err
	}
	if note != "" {
		res.Notes = append(res.Notes, note)
	}
	changed, undo, err := atomicfile.WriteSetUndo(append(files, conf...), h.Write)
	if err != nil {
		return res, err
	}
	// From here a failure puts the old files back (and lets networkd see
	// them again), so a failed apply leaves the files as they were.
	fail := func(err error) (Result, error) {
		if uerr := undo(); uerr != nil {
			return res, errors.Join(err, fmt.Errorf("restore files: %w", uerr))
		}
		if res.Reloaded || res.Restarted {
			if rerr := h.Reloader.Reload(ctx); rerr != nil {
				return res, errors.Join(err, rerr)
			}
		}
		return res, fmt.Errorf("%w (files restored)", err)
	}
	if err := h.bringUp(ctx, cfg, opts, changed, conf, &res); err != nil {
		return fail(err)
	}
	if res.Sysctls, err = h.setUplinkSysctls(cfg.Network.Uplinks); err != nil {
		return fail(err)
	}
	res.Changed = changed
	// Files unchanged but the link or a VIP gone (deleted by hand, networkd
	// restarted late): one reload lets networkd recreate them.
	if !opts.Netlink && !res.Reloaded && !res.Restarted && len(Verify(h.Netlink, h.Sysctl, cfg)) > 0 {
		if err := h.Reloader.Reload(ctx); err != nil {
			return res, err
		}
		res.Reloaded = true
	}
	res.Problems = h.waitVerified(ctx, cfg, opts.Wait)
	return res, nil
}

// bringUp makes the link and VIPs appear: with netlink directly, else by
// restarting networkd when its networkd.conf.d drop-in changed (it reads
// networkd.conf at start only: a reload would configure dummyvip0 under
// the old settings) or reloading it when another file did.
func (h Host) bringUp(ctx context.Context, cfg *config.Valid, opts Options, changed []string, conf []atomicfile.File, res *Result) error {
	switch {
	case opts.Netlink:
		return h.ensureLink(cfg)
	case len(conf) > 0 && slices.Contains(changed, conf[0].Path):
		if err := h.Reloader.Restart(ctx); err != nil {
			return err
		}
		res.Restarted = true
	case len(changed) > 0:
		if err := h.Reloader.Reload(ctx); err != nil {
			return err
		}
		res.Reloaded = true
	}
	return nil
}

// preflight rejects what would leave the host half-configured: a missing
// uplink, a VIP already held by an unrelated interface, networkd not running.
func (h Host) preflight(ctx context.Context, cfg *config.Valid, opts Options) error {
	for i, up := range cfg.Network.Uplinks {
		if _, err := h.Netlink.LinkByName(up); err != nil {
			return &config.Error{File: cfg.Path, Key: fmt.Sprintf("network.uplinks[%d]", i), Reason: fmt.Sprintf("uplink %s does not exist on this host: %v", up, err)}
		}
	}
	if err := h.checkVIPHolders(cfg); err != nil {
		return err
	}
	if !opts.Netlink {
		return h.Reloader.Running(ctx)
	}
	return nil
}

// checkVIPHolders allows the VIP on the VIP link and on an uplink (where
// keepalived puts it on the VRRP master) and rejects it anywhere else: a
// second copy elsewhere would answer ARP or steal the address.
func (h Host) checkVIPHolders(cfg *config.Valid) error {
	allowed := map[string]bool{cfg.Network.Interface: true}
	for _, up := range cfg.Network.Uplinks {
		allowed[up] = true
	}
	links, err := h.Netlink.LinkList()
	if err != nil {
		return fmt.Errorf("list links: %w", err)
	}
	for _, link := range links {
		name := link.Attrs().Name
		if allowed[name] {
			continue
		}
		have, err := linkAddrs(h.Netlink, link)
		if err != nil {
			return err
		}
		for i, vip := range cfg.VIP.Addresses {
			if have[vip] {
				return &config.Error{File: cfg.Path, Key: fmt.Sprintf("vip.addresses[%d]", i),
					Reason: fmt.Sprintf("%s is already on interface %s, which is neither %s nor an uplink: remove it there first", vip, name, cfg.Network.Interface)}
			}
		}
	}
	return nil
}

// ensureLink creates the dummy link if missing, brings it up and adds each
// VIP as a host address (IPv6 without DAD). An existing link of another
// kind is used as is: tests stand in a veth where the kernel has no dummy.
func (h Host) ensureLink(cfg *config.Valid) error {
	name := cfg.Network.Interface
	link, err := h.Netlink.LinkByName(name)
	switch {
	case IsLinkNotFound(err):
		if link, err = h.createDummy(name); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("look up link %s: %w", name, err)
	}
	if err := h.Netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("set link %s up: %w", name, err)
	}
	for _, vip := range cfg.VIP.Addresses {
		if err := h.Netlink.AddrReplace(link, HostAddr(vip)); err != nil {
			return fmt.Errorf("add %s to %s: %w", hostPrefix(vip), name, err)
		}
	}
	return nil
}

// createDummy adds the dummy link with IPv6 address generation off (like
// LinkLocalAddressing=no: the link holds the VIP and nothing else).
func (h Host) createDummy(name string) (netlink.Link, error) {
	if err := h.Netlink.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}}); err != nil {
		return nil, fmt.Errorf("create dummy link %s: %w (is the dummy kernel module available?)", name, err)
	}
	link, err := h.Netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("the new link: %w", err)
	}
	// IN6_ADDR_GEN_MODE_NONE (linux/if_link.h): no link-local address.
	const in6AddrGenModeNone = 1
	if err := h.Netlink.LinkSetIP6AddrGenMode(link, in6AddrGenModeNone); err != nil {
		return nil, fmt.Errorf("turn off IPv6 address generation on %s: %w", name, err)
	}
	return link, nil
}

// setUplinkSysctls applies the ARP values at once (sysctl.d only acts at
// boot and when udev sees a new interface) and returns what it changed.
func (h Host) setUplinkSysctls(uplinks []string) ([]string, error) {
	var changed []string
	for _, up := range uplinks {
		for _, set := range UplinkSettings {
			if v, err := h.Sysctl.Get(up, set.Name); err == nil && v == set.Value {
				continue
			}
			if err := h.Sysctl.Set(up, set.Name, set.Value); err != nil {
				return changed, err
			}
			changed = append(changed, fmt.Sprintf("net.ipv4.conf.%s.%s=%d", up, set.Name, set.Value))
		}
	}
	return changed, nil
}

// waitVerified polls Verify until it passes or wait (at least one check) ends.
func (h Host) waitVerified(ctx context.Context, cfg *config.Valid, wait time.Duration) []string {
	deadline := time.Now().Add(wait)
	for {
		problems := Verify(h.Netlink, h.Sysctl, cfg)
		if len(problems) == 0 || time.Now().After(deadline) {
			return problems
		}
		select {
		case <-ctx.Done():
			return append(problems, ctx.Err().Error())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// RemoveResult is what Remove did.
type RemoveResult struct {
	Removed     []string // files deleted
	Reloaded    bool
	LinkDeleted bool     // the dummy link was deleted
	AddrsGone   []string // VIPs taken off a non-dummy link
}

// Remove deletes the files Apply writes, reloads networkd if it runs and a
// file went away (networkd never deletes a netdev itself), then deletes the
// dummy link; a link of another kind (a test stand-in) only loses the VIPs.
// The uplink sysctls keep their values until reboot: harmless without a VIP.
func (h Host) Remove(ctx context.Context, cfg *config.Valid, opts Options) (RemoveResult, error) {
	var res RemoveResult
	files := append(Render(cfg, opts.Root).List(), NetworkdConf(cfg, opts.Root))
	for _, f := range files {
		err := os.Remove(f.Path)
		if err == nil {
			res.Removed = append(res.Removed, f.Path)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return res, fmt.Errorf("remove %s: %w", f.Path, err)
		}
	}
	if len(res.Removed) > 0 && !opts.Netlink && h.Reloader.Running(ctx) == nil {
		if err := h.Reloader.Reload(ctx); err != nil {
			return res, err
		}
		res.Reloaded = true
	}
	return res, h.removeLink(cfg, &res)
}

func (h Host) removeLink(cfg *config.Valid, res *RemoveResult) error {
	name := cfg.Network.Interface
	link, err := h.Netlink.LinkByName(name)
	if IsLinkNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up link %s: %w", name, err)
	}
	if link.Type() == "dummy" {
		if err := h.Netlink.LinkDel(link); err != nil {
			return fmt.Errorf("delete link %s: %w", name, err)
		}
		res.LinkDeleted = true
		return nil
	}
	have, err := linkAddrs(h.Netlink, link)
	if err != nil {
		return err
	}
	for _, vip := range cfg.VIP.Addresses {
		if !have[vip] {
			continue
		}
		if err := h.Netlink.AddrDel(link, HostAddr(vip)); err != nil {
			return fmt.Errorf("remove %s from %s: %w", hostPrefix(vip), name, err)
		}
		res.AddrsGone = append(res.AddrsGone, hostPrefix(vip).String())
	}
	return nil
}

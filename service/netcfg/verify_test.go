package netcfg

import (
	"context"
	"slices"
	"testing"
)

// TestVerifyAgainstKernel runs the verification in a private namespace and
// checks the exact problem lines as each piece goes missing.
func TestVerifyAgainstKernel(t *testing.T) {
	cfg := testConfig(t)
	n := newTestNS(t)
	n.veth(t, "up0", "up0-peer")
	h := Host{Netlink: n.nl, Sysctl: n.sysctl()}
	expect := func(step string, want ...string) {
		t.Helper()
		if got := Verify(h.Netlink, h.Sysctl, cfg); !slices.Equal(got, want) {
			t.Errorf("%s:\n got  %q\n want %q", step, got, want)
		}
	}
	expect("nothing set up",
		"link dummyvip0 does not exist",
		"net.ipv4.conf.up0.arp_ignore is 0, want 1",
		"net.ipv4.conf.up0.arp_announce is 0, want 2")

	n.ip(t, "link", "add", "dummyvip0", "type", "veth", "peer", "name", "vip-peer")
	n.ip(t, "link", "set", "vip-peer", "up")
	res, err := h.Apply(context.Background(), cfg, Options{Root: t.TempDir(), Netlink: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Problems) != 0 {
		t.Fatalf("after apply --netlink: %q", res.Problems)
	}
	expect("applied")

	n.ip(t, "addr", "del", "2001:db8:1::100/128", "dev", "dummyvip0")
	expect("IPv6 VIP gone", "link dummyvip0 lacks VIP 2001:db8:1::100/128")

	n.ip(t, "link", "set", "dummyvip0", "down")
	// The kernel keeps IPv4 addresses on a down link but flushes IPv6 ones.
	expect("link down", "link dummyvip0 is down (administratively)", "link dummyvip0 lacks VIP 2001:db8:1::100/128")

	n.ip(t, "link", "set", "dummyvip0", "up")
	n.ip(t, "link", "set", "vip-peer", "down")
	n.ip(t, "addr", "add", "2001:db8:1::100/128", "dev", "dummyvip0", "nodad")
	expect("carrier lost", "link dummyvip0 is up but its operational state is lower-layer-down")
	n.ip(t, "link", "set", "vip-peer", "up")

	for _, kv := range [][2]string{{"all", "arp_ignore"}, {"default", "arp_ignore"}, {"up0", "arp_announce"}} {
		if err := h.Sysctl.Set(kv[0], kv[1], 1); err != nil {
			t.Fatal(err)
		}
	}
	expect("naive all/default fix",
		"net.ipv4.conf.up0.arp_announce is 1, want 2",
		"net.ipv4.conf.all.arp_ignore is 1, want 0: it reaches pod veths and breaks pod -> VIP hairpin; set ARP per uplink only",
		"net.ipv4.conf.default.arp_ignore is 1, want 0: it reaches pod veths and breaks pod -> VIP hairpin; set ARP per uplink only")

	cfg.Network.Uplinks = []string{"up0", "eth9"}
	h.Sysctl.Set("all", "arp_ignore", 0)
	h.Sysctl.Set("default", "arp_ignore", 0)
	h.Sysctl.Set("up0", "arp_announce", 2)
	expect("uplink missing", "uplink eth9 does not exist")
}

// TestRemove deletes the files and takes the VIPs off a non-dummy link.
func TestRemove(t *testing.T) {
	cfg := testConfig(t)
	_, h, fake := hostIn(t, cfg)
	root := t.TempDir()
	ctx := context.Background()
	if _, err := h.Apply(ctx, cfg, Options{Root: root, Wait: 5e9}); err != nil {
		t.Fatal(err)
	}
	res, err := h.Remove(ctx, cfg, Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 4 || !res.Reloaded || fake.reloads != 1 || len(res.AddrsGone) != 2 || res.LinkDeleted {
		t.Fatalf("remove: %+v (reloads %d); want 4 files (networkd.conf.d too), a reload, 2 VIPs removed, the veth kept", res, fake.reloads)
	}
	got := Verify(h.Netlink, h.Sysctl, cfg)
	want := []string{"link dummyvip0 lacks VIP 10.0.0.100/32", "link dummyvip0 lacks VIP 2001:db8:1::100/128"}
	if !slices.Equal(got, want) {
		t.Errorf("after remove: %q, want %q", got, want)
	}
	again, err := h.Remove(ctx, cfg, Options{Root: root})
	if err != nil || len(again.Removed) != 0 || again.Reloaded {
		t.Errorf("second remove: %+v, %v; want nothing to do", again, err)
	}
}

package announce

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/service/netcfg"
)

// TestOpenRefusesAnotherProgramsDevice: a device named as the announce
// link that vipproxy did not create (a persistent TUN device of someone's
// `ip tuntap add`, or lo) is refused, and left as it was. Before, Open
// attached to the TUN device, cleared its persist flag and put the VIPs on
// it, and the next withdrawal destroyed it.
func TestOpenRefusesAnotherProgramsDevice(t *testing.T) {
	ns := testutil.NewNetNS(t, "vpl")
	ns.IP(t, "tuntap", "add", "dev", "othertun0", "mode", "tun")
	h, err := netns.GetFromName(ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	vips := []netip.Addr{netip.MustParseAddr("192.0.2.10")}
	for _, name := range []string{"othertun0", "lo"} {
		err := netcfg.InNetNS(int(h), func() error {
			l, err := Open(name, vips)
			if err == nil {
				l.Close()
			}
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "a device of that name exists") {
			t.Errorf("Open(%s) = %v, want refused as another program's device", name, err)
		}
	}
	out, err := ns.Exec("ip", "-d", "addr", "show", "dev", "othertun0")
	if err != nil || !strings.Contains(out, "persist") || strings.Contains(out, "192.0.2.10") {
		t.Errorf("the other program's device was changed or removed: %v\n%s", err, out)
	}
}

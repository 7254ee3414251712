package doctor

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/internal/testutil/testconfig"
)

// TestVIPPortSharedByReusePort: a program on every address of the VIP
// port (RKE2's kube-apiserver on *:6443) fails vip-port, unless
// vip.reuse_port is set and the program bound with SO_REUSEPORT
// (--permit-port-sharing=true): the check then binds as the listener
// would, and passes naming the program it shares the port with. The VIP is
// TEST-NET-1, bound with IP_FREEBIND and never sent to.
func TestVIPPortSharedByReusePort(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		holderShares, reusePort bool
		want                    string
	}{
		{"the holder shares, reuse_port", true, true, "PASS shared (vip.reuse_port, SO_REUSEPORT) with *:"},
		{"the holder shares, no reuse_port", true, false, "FAIL vipproxy cannot listen on the VIP"},
		{"the holder does not share", false, true, "FAIL vip.reuse_port cannot share it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			holder := testutil.WildcardListener(t, tc.holderShares)
			port := holder.Addr().(*net.TCPAddr).Port
			cfg := testconfig.WithBackend(t, "192.0.2.1:6443", "[vip]", `addresses = ["192.0.2.57"]`, fmt.Sprintf("port = %d", port),
				fmt.Sprintf("reuse_port = %v", tc.reusePort), "[network]", `uplinks = ["eth0"]`)
			r := checkVIPPort(context.Background(), Host{Proc: "/proc"}, cfg)
			got := fmt.Sprintf("%s %s", r.Status, r.Detail)
			status, text, _ := strings.Cut(tc.want, " ")
			if string(r.Status) != status || !strings.Contains(r.Detail, text) {
				t.Errorf("vip-port: %s (fix: %s); want %s", got, r.Fix, tc.want)
			}
		})
	}
}

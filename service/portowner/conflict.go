package portowner

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Conflicts returns the listeners on port that keep vipproxy from binding
// VIP:port: those on every address (a [::] socket also covers IPv4 unless
// it is IPV6_V6ONLY, which /proc does not show: counted) and those on a
// VIP itself that are not vipproxy's (see Ours).
func Conflicts(ls []Listener, vips []netip.Addr) []Listener {
	var out []Listener
	for _, l := range ls {
		switch {
		case l.Wildcard() && (l.Addr.Addr().Is6() || vipsHave4(vips)):
			out = append(out, l)
		case slices.Contains(vips, l.Addr.Addr()) && !Ours(l):
			out = append(out, l)
		}
	}
	return out
}

func vipsHave4(vips []netip.Addr) bool {
	return slices.ContainsFunc(vips, netip.Addr.Is4)
}

// Ours reports whether a listener is vipproxy's own: held by vipproxy or by
// systemd for vipproxy.socket (pid 1 holds every socket unit's listener).
func Ours(l Listener) bool {
	return l.Command == "vipproxy" || l.PID == 1
}

// apiservers are the process names (comm, 15 characters at most) of the
// programs that serve the Kubernetes API on 6443 by default, and of
// vipproxy-apiserver, the stand-in of the tests and the demo.
var apiservers = []string{"kube-apiserver", "k3s", "k3s-server", "rke2", "k0s", "kubelite", "hyperkube", "vipproxy-apiser"}

// Apiserver reports whether the listener is a local Kubernetes apiserver.
func Apiserver(l Listener) bool { return slices.Contains(apiservers, l.Command) }

// Fix says what to do about a listener that holds the VIP port.
func Fix(l Listener) string {
	if Apiserver(l) || l.PID == 0 && l.Addr.Port() == 6443 {
		return "bind the local apiserver to this node's own IP instead of every address " +
			"(kubeadm: apiServer.extraArgs bind-address=<node IP> with localAPIEndpoint.advertiseAddress; " +
			"k3s: --bind-address=<node IP>; RKE2, whose kube-apiserver always binds every address: " + rke2Share + "; k0s: spec.api.address=<node IP> and no k0s CPLB; " +
			"NixOS: services.kubernetes.apiserver.bindAddress, or --bind-address=<node IP> in services.k3s.extraFlags); docs/distributions.md: \"Port 6443 and the local apiserver\""
	}
	return "make that program listen on its own address only, stop it, or give vipproxy another vip.port"
}

// rke2Share is how an RKE2 server shares 6443 with vipproxy.
const rke2Share = "kube-apiserver-arg: [permit-port-sharing=true] in /etc/rancher/rke2/config.yaml with vip.reuse_port = true"

// ShareFix says what to do when vip.reuse_port is set but the holder of
// the port does not share it.
const ShareFix = "start the program on every address with SO_REUSEPORT, as the user that binds the VIP (root for vipproxy.socket): " +
	"kube-apiserver --permit-port-sharing=true (RKE2: " + rke2Share + "); or bind it to this node's own IP"

// Explain is one line naming who holds port against vips and the fix,
// or "" when nobody visible does; shared: vipproxy bound with
// SO_REUSEPORT (vip.reuse_port) and still failed, so the holder does not
// share.
func Explain(procRoot string, vips []netip.Addr, port uint16, shared bool) string {
	ls, err := Listeners(procRoot, port)
	if err != nil {
		return fmt.Sprintf("cannot tell who holds port %d: %v", port, err)
	}
	cs := Conflicts(ls, vips)
	if len(cs) == 0 {
		return ""
	}
	held := make([]string, 0, len(cs))
	for _, c := range cs {
		held = append(held, c.String())
	}
	fix := Fix(cs[0])
	if shared {
		fix = ShareFix
	}
	return fmt.Sprintf("port %d is held by %s; fix: %s", port, strings.Join(held, ", "), fix)
}

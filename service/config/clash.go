package config

import "net/netip"

// adminListener is Listener.What of admin.listen.
const adminListener = "the admin listener"

// listenerClash refuses an admin.listen that takes the address and port of
// a VIP listener: both cannot bind, so `serve` failed at start, or, with
// admin.strict = false, served the VIP without its admin endpoint (no
// /readyz for keepalived's probe). A reload to such a port is refused the
// same way, as every reload is validated.
func (v *validator) listenerClash() {
	for _, e := range v.errs {
		if e.Key == "admin.listen" {
			return // said once
		}
	}
	ls := v.c.Listeners()
	for _, a := range ls {
		if a.What != adminListener {
			continue
		}
		for _, vip := range ls {
			if vip.What != adminListener && sameSocket(a.Addr, vip.Addr) {
				which := "admin.listen"
				if v.c.Admin.Listen == DefaultAdminListen {
					which += ", its default,"
				}
				v.bad("admin.listen", "%q takes port %d of %s (%s): the two cannot both bind; set %s to another port or change the VIP's",
					v.c.Admin.Listen, a.Addr.Port(), vip.What, vip.Addr, which)
				return
			}
		}
	}
}

// sameSocket says whether two TCP listeners contend for one port: the same
// address, or one of them on the unspecified address of the other's family
// (an IPv6 one, as Go binds it, takes IPv4 too).
func sameSocket(a, b netip.AddrPort) bool {
	if a.Port() != b.Port() {
		return false
	}
	x, y := a.Addr(), b.Addr()
	covers := func(u, o netip.Addr) bool { return u.IsUnspecified() && (u.Is6() || o.Is4()) }
	return x == y || covers(x, y) || covers(y, x)
}

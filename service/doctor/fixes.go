package doctor

// fixes is each fix worded for how vipproxy was installed here: on NixOS
// the module wrote the units, networkd files, sysctls and keepalived.conf,
// so the fix is in the system configuration, never in files under /etc.
type fixes struct {
	network        string // dummy link or its VIPs missing
	arp            string // uplink ARP sysctls not as rendered
	socket         string // vipproxy.socket not listening on the VIPs
	keepalivedConf string // keepalived has no config (it does not start)
	trackProbe     string // no vrrp_script running the probe, or not tracked
	virtualServer  string // an IPVS virtual_server on the VIP
	otherInstance  string // another vrrp_instance holds the VIP
	strict         string // vrrp_strict or no_accept: keepalived drops the VIP's packets
	keepalivedUnit string // keepalived.service not active
	twoHolders     string // two nodes answer for the VIP: split brain or ARP flux
	birdConf       string // BIRD runs without vipproxy's protocols
	birdUnit       string // BIRD does not answer birdc
	announceUnit   string // the proxy is ready but nothing holds the announce link
}

const noAllARP = "; do not set net.ipv4.conf.all.arp_ignore (the naive fix): it reaches pod veths and breaks pod -> VIP hairpin"

var debianFixes = fixes{
	network:        "vipproxy network apply (or systemctl restart vipproxy-network)",
	arp:            "vipproxy network apply (or systemctl restart vipproxy-network) sets them on the uplinks only" + noAllARP,
	socket:         "vipproxy units write, then systemctl daemon-reload && systemctl restart vipproxy.socket (the socket binds the VIP only when it starts)",
	keepalivedConf: "create it with `include /etc/keepalived/conf.d/*.conf` (Debian's unit has ConditionFileNotEmpty= on it and ships only a sample), then systemctl restart keepalived",
	trackProbe:     "vipproxy keepalived write (it writes /etc/keepalived/conf.d/vipproxy.conf); include it from keepalived.conf; systemctl reload keepalived",
	virtualServer:  "remove the virtual_server: vipproxy balances the VIP",
	otherInstance:  "remove the VIP from that vrrp_instance (or the instance): vipproxy's instance holds it; systemctl reload keepalived",
	strict:         "remove that line (keepalived's sample keepalived.conf has vrrp_strict); systemctl restart keepalived (it deletes its drop rule when it stops)",
	keepalivedUnit: "systemctl enable --now keepalived; journalctl -u keepalived",
	twoHolders: "vipproxy network apply on every node (arp_ignore=1 on the uplinks: only the VRRP master may answer); " +
		"let VRRP adverts (IP protocol 112) pass between the nodes, or the backups also become masters",
	birdConf:     `vipproxy bird write (it writes /etc/bird/vipproxy.conf); add include "/etc/bird/vipproxy.conf"; to /etc/bird/bird.conf; birdc configure`,
	birdUnit:     "apt-get install bird2; systemctl enable --now bird.service; journalctl -u bird",
	announceUnit: "systemctl enable --now vipproxy-announce.service; journalctl -u vipproxy-announce",
}

var nixosFixes = fixes{
	network: "services.vipproxy declares the dummy link through systemd-networkd (systemd.network.netdevs/networks, " +
		"from settings.network and settings.vip): check them, nixos-rebuild switch, then systemctl restart systemd-networkd; " +
		"journalctl -u systemd-networkd",
	arp: "services.vipproxy sets them through boot.kernel.sysctl from settings.network.uplinks: nixos-rebuild switch " +
		"(or systemctl restart systemd-sysctl)" + noAllARP,
	socket: "services.vipproxy writes vipproxy.socket's ListenStream= from settings.vip: nixos-rebuild switch, then " +
		"systemctl restart vipproxy.socket (the socket binds the VIP only when it starts)",
	keepalivedConf: "set services.vipproxy.keepalived.enable = true (the default; it enables services.keepalived), nixos-rebuild switch",
	trackProbe: "services.vipproxy.keepalived.enable = true declares services.keepalived.vrrpScripts and the instance's " +
		"trackScripts; an instance of your own in services.keepalived must list it in trackScripts; nixos-rebuild switch",
	virtualServer: "remove that virtual_server from services.keepalived.extraConfig (vipproxy balances the VIP), nixos-rebuild switch",
	otherInstance: "remove the VIP from that instance in services.keepalived.vrrpInstances or extraConfig (vipproxy's instance " +
		"holds it), nixos-rebuild switch",
	strict: "remove it from services.keepalived.extraGlobalDefs or the instance's extraConfig, nixos-rebuild switch, " +
		"systemctl restart keepalived (it deletes its drop rule when it stops)",
	keepalivedUnit: "systemctl start keepalived (NixOS starts it 5 s after boot, keepalived-boot-delay.timer); " +
		"journalctl -u keepalived; services.vipproxy.keepalived.enable must be true",
	twoHolders: "services.vipproxy on every node with settings.network.uplinks set (arp_ignore=1 on the uplinks: only the " +
		"VRRP master may answer), nixos-rebuild switch; let VRRP adverts (IP protocol 112) pass between the nodes " +
		"(services.vipproxy.openFirewall = true), or the backups also become masters",
	birdConf: "services.vipproxy with settings.vip.mode = \"bgp\" gives services.bird2 the file vipproxy bird renders; " +
		"a BIRD config of your own must include it; nixos-rebuild switch",
	birdUnit:     "services.vipproxy with settings.vip.mode = \"bgp\" enables services.bird2: nixos-rebuild switch; journalctl -u bird2",
	announceUnit: "systemctl start vipproxy-announce (services.vipproxy enables it in bgp mode); journalctl -u vipproxy-announce",
}

func (in Install) fixes() fixes {
	if in.NixOS {
		return nixosFixes
	}
	return debianFixes
}

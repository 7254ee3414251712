package testconfig

import (
	"fmt"
	"strings"
)

// A Field is a config key whose value vipproxy writes into another
// program's file (keepalived.conf, BIRD's include, systemd drop-ins,
// networkd and sysctl.d files) or uses as a path. The config package holds
// check to refusing every hostile value of each; the renderers' packages
// run the real parsers on every value check accepts.
type Field struct {
	Key  string // as errors name it: keepalived.unicast_peers[0]
	Base string // the config it is set in: "vrrp", "bgp" or "ports"
	// Line sets the key in its table; %s is the value as a TOML string.
	Table, Line string
	// Good is a valid value; hostile values are tried alone, appended to
	// it, and inserted into it before its last character.
	Good string
	// Prefix comes before every value tried (admin.listen's "unix:").
	Prefix string
}

// Fields are every value the renderers write, with how to set it.
var Fields = []Field{
	{Key: "vip.addresses[0]", Base: "vrrp", Table: "vip", Line: "addresses = [%s]", Good: "192.0.2.10"},
	{Key: "vip.addresses[0]", Base: "bgp", Table: "vip", Line: "addresses = [%s]", Good: "2001:db8::10"},
	{Key: "port[0].name", Base: "ports", Table: "[port]", Line: "name = %s", Good: "api"},
	{Key: "network.interface", Base: "vrrp", Table: "network", Line: "interface = %s", Good: "vip0"},
	{Key: "network.uplinks[0]", Base: "vrrp", Table: "network", Line: "uplinks = [%s]", Good: "eth1"},
	{Key: "network.networkd_dir", Base: "vrrp", Table: "network", Line: "networkd_dir = %s", Good: "/etc/systemd/network"},
	{Key: "network.netdev_file", Base: "vrrp", Table: "network", Line: "netdev_file = %s", Good: "60-vipproxy.netdev"},
	{Key: "network.network_file", Base: "vrrp", Table: "network", Line: "network_file = %s", Good: "60-vipproxy.network"},
	{Key: "network.sysctl_file", Base: "vrrp", Table: "network", Line: "sysctl_file = %s", Good: "/etc/sysctl.d/60-vipproxy.conf"},
	{Key: "network.socket_dropin", Base: "vrrp", Table: "network", Line: "socket_dropin = %s", Good: "/etc/systemd/system/vipproxy.socket.d/50-listen.conf"},
	{Key: "admin.listen", Base: "vrrp", Table: "admin", Line: "listen = %s", Good: "/run/vipproxy/admin.sock", Prefix: "unix:"},
	{Key: "discovery.state_dir", Base: "vrrp", Table: "discovery", Line: "state_dir = %s", Good: "/var/lib/vipproxy"},
	{Key: "keepalived.instance", Base: "vrrp", Table: "keepalived", Line: "instance = %s", Good: "vipproxy"},
	{Key: "keepalived.interface", Base: "vrrp", Table: "keepalived", Line: "interface = %s", Good: "eth2"},
	{Key: "keepalived.unicast_src_ip", Base: "vrrp", Table: "keepalived", Line: "unicast_src_ip = %s\nunicast_peers = [\"192.0.2.12\"]", Good: "192.0.2.11"},
	{Key: "keepalived.unicast_peers[0]", Base: "vrrp", Table: "keepalived", Line: "unicast_peers = [%s]", Good: "192.0.2.12"},
	{Key: "keepalived.unicast_peers[0]", Base: "vrrp6", Table: "keepalived", Line: "unicast_peers = [%s]", Good: "2001:db8::2"},
	{Key: "keepalived.auth_pass", Base: "vrrp", Table: "keepalived", Line: "auth_pass = %s", Good: "s3cret"},
	{Key: "keepalived.probe_command", Base: "vrrp", Table: "keepalived", Line: "probe_command = %s", Good: "/bin/true probe"},
	{Key: "bgp.interface", Base: "bgp", Table: "bgp", Line: "interface = %s", Good: "vipbgp1"},
	{Key: "bgp.router_id", Base: "bgp", Table: "bgp", Line: "router_id = %s", Good: "192.0.2.11"},
	{Key: "bgp.communities[0]", Base: "bgp", Table: "bgp", Line: "communities = [%s]", Good: "65000:100"},
	{Key: "bgp.peers[0].name", Base: "bgp", Table: "bgp", Line: `peers = [{name = %s, address = "2001:db8::1", as = 65000}]`, Good: "tor_a"},
	{Key: "bgp.peers[0].address", Base: "bgp", Table: "bgp", Line: `peers = [{address = %s, as = 65000}]`, Good: "2001:db8::1"},
	{Key: "bgp.peers[0].password", Base: "bgp", Table: "bgp", Line: `peers = [{password = %s, address = "2001:db8::1", as = 65000}]`, Good: "s3cret"},
}

// Injection is the keepalived directive a unicast peer carried in its
// zone: netip.ParseAddr took it, and the rendered instance ran it as root.
const Injection = "%x\n }\n notify_master \"/usr/local/sbin/evil\"\n unicast_peer {"

// Hostile are the values tried in every field: what ends a line, a string,
// a block or a file's name, what a zone hides, and what is too long.
var Hostile = []string{
	".", "..", "-", "_", ":", "\n", "\x00", "\r", "\t", "\x7f", "{", "}", "\"", "'", "\\", ";", "#", "!", " ", "*", "/", "%eth0", "%",
	Injection, "$(reboot)", "é", strings.Repeat("a", 300), strings.Repeat("a", 5000),
}

// MustRefuse are the hostile values no field takes: a line end, a NUL, the
// injection and a value longer than any consumer reads.
var MustRefuse = []string{"\n", "\x00", "\r", Injection, strings.Repeat("a", 5000)}

// Values are the values tried in f: each hostile value alone, after
// f.Good and inside it (before its last character, and before the dot of
// a file name's suffix).
func (f Field) Values() []string {
	out := []string{f.Prefix + f.Good}
	inside := []int{len(f.Good) - 1}
	if i := strings.LastIndex(f.Good, "."); i > 0 {
		inside = append(inside, i)
	}
	for _, h := range Hostile {
		out = append(out, f.Prefix+h, f.Prefix+f.Good+h)
		for _, i := range inside {
			out = append(out, f.Prefix+f.Good[:i]+h+f.Good[i:])
		}
	}
	return out
}

// bases are the configs the fields are set in, table by table.
var bases = map[string][][2]string{
	"vrrp": {
		{"vip", `addresses = ["192.0.2.10"]` + "\nport = 6443"},
		{"network", `uplinks = ["eth1"]`},
		{"keepalived", `probe_command = "/bin/true probe"`},
		{"[backend]", `address = "192.0.2.21:6443"`},
	},
	"vrrp6": {
		{"vip", `addresses = ["2001:db8::10"]` + "\nport = 6443"},
		{"network", `uplinks = ["eth1"]`},
		{"keepalived", `probe_command = "/bin/true probe"`},
		{"[backend]", `address = "192.0.2.21:6443"`},
	},
	"ports": {
		{"vip", `addresses = ["192.0.2.10"]`},
		{"[port]", "name = \"api\"\nport = 6443"},
		{"network", `uplinks = ["eth1"]`},
		{"keepalived", `probe_command = "/bin/true probe"`},
		{"[backend]", `address = "192.0.2.21"`},
	},
	"bgp": {
		{"vip", "mode = \"bgp\"\n" + `addresses = ["2001:db8::10"]` + "\nport = 6443"},
		{"network", `uplinks = ["eth1"]`},
		{"bgp", "local_as = 65001\n" + `router_id = "192.0.2.11"` + "\n" + `peers = [{address = "2001:db8::1", as = 65000}]`},
		{"[backend]", `address = "192.0.2.21:6443"`},
	},
}

// Config is f's base config with f set to value (written as a TOML
// string): a line of the base that sets the same key is replaced.
func (f Field) Config(value string) string {
	var b strings.Builder
	setKey, _, _ := strings.Cut(f.Line, " =")
	found := false
	for _, t := range bases[f.Base] {
		fmt.Fprintf(&b, "[%s]\n", t[0])
		for _, line := range strings.Split(t[1], "\n") {
			if k, _, _ := strings.Cut(line, " ="); k == setKey && t[0] == f.Table {
				continue
			}
			b.WriteString(line + "\n")
		}
		if t[0] == f.Table {
			fmt.Fprintf(&b, f.Line+"\n", TOMLString(value))
			found = true
		}
	}
	if !found {
		fmt.Fprintf(&b, "[%s]\n"+f.Line+"\n", f.Table, TOMLString(value))
	}
	return b.String()
}

// TOMLString writes s as a TOML basic string: control characters, quotes
// and backslashes escaped.
func TOMLString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteString(`\` + string(r))
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

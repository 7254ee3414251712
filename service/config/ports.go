package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Port is one [[port]] table: a port the VIP serves, with its own
// listener on every VIP and its own pool and health state over the same
// backends (a node whose konnectivity server is down still serves the API).
// k0s puts 6443, 8132 and 9443 behind its VIP; RKE2 6443 and 9345.
type Port struct {
	// Name labels logs, metrics (port="api"), /status and the systemd
	// socket's FileDescriptorName=: [a-z][a-z0-9-]*, unique.
	Name string `toml:"name"`
	// Port is the port clients connect to on the VIP.
	Port uint16 `toml:"port"`
	// BackendPort is the port on each backend host; default Port. In the
	// served form of a config without [[port]] (see ServedPorts) it is 0:
	// each backend's address carries its own port.
	BackendPort uint16 `toml:"backend_port"`
	// Required says the port must have a healthy backend for this node to
	// be ready (and hold the VIP); default true for the first [[port]],
	// false for the others. Validate always sets it.
	Required *bool `toml:"required"`
	// Health is [health] with the keys [port.health] sets replaced: Parse
	// decodes the table over a copy of [health]; a Config built in code
	// that leaves it zero takes [health] as it is.
	Health Health `toml:"health"`
}

// LegacyPortName is the name of the one port of a config without [[port]]
// tables (vip.port, each backend's own port).
const LegacyPortName = "api"

// maxPorts bounds the [[port]] tables: k0s needs 3; each port is a
// listener per VIP, a pool and a health checker per backend.
const maxPorts = 16

// maxPortName bounds a port name: it is a metrics label value, a log
// field and a systemd unit instance.
const maxPortName = 32

// IsRequired reports whether the port must have a healthy backend for the
// node to be ready.
func (p Port) IsRequired() bool { return p.Required != nil && *p.Required }

// BackendAddress is the one place that says where backend b is dialed and
// checked for port p: b's host at the port's backend_port, or, in a
// config without [[port]] tables (BackendPort 0), b's own host:port.
func (p Port) BackendAddress(b Backend) string {
	if p.BackendPort == 0 {
		return b.Address
	}
	return net.JoinHostPort(strings.TrimSuffix(strings.TrimPrefix(b.Address, "["), "]"), strconv.Itoa(int(p.BackendPort)))
}

// ServedPorts is every port the VIP serves, in the order of the file. A
// config without [[port]] tables serves one, named "api", on vip.port,
// each backend at its own host:port.
func (v *Valid) ServedPorts() []Port { return v.servedPorts() }

func (c *Config) servedPorts() []Port {
	if len(c.Ports) > 0 {
		return c.Ports
	}
	required := true
	return []Port{{Name: LegacyPortName, Port: c.VIP.Port, Required: &required, Health: c.Health}}
}

// DiscoveredBackend is the backend for an apiserver that discovery found at
// host:port: host:port itself without [[port]] tables, its host alone with
// them (each [[port]] adds its backend_port).
func (v *Valid) DiscoveredBackend(hostPort string) Backend {
	if len(v.Ports) == 0 {
		return Backend{Name: hostPort, Address: hostPort}
	}
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		host = hostPort
	}
	return Backend{Name: host, Address: host}
}

// DiscoveryPort is the port discovery reaches the apiservers on through a
// static backend (its seed): the port named "api", else the first port.
func (v *Valid) DiscoveryPort() Port {
	ports := v.ServedPorts()
	for _, p := range ports {
		if p.Name == LegacyPortName {
			return p
		}
	}
	return ports[0]
}

// derivePortDefaults fills each [[port]]'s backend_port, required and
// (for a Config built in code) health.
func (c *Config) derivePortDefaults() {
	if len(c.Ports) == 0 {
		return
	}
	ports := make([]Port, len(c.Ports))
	for i, p := range c.Ports {
		if p.BackendPort == 0 {
			p.BackendPort = p.Port
		}
		if p.Required == nil {
			required := i == 0
			p.Required = &required
		} else {
			required := *p.Required // not shared with the caller's Config
			p.Required = &required
		}
		if p.Health == (Health{}) {
			p.Health = c.Health
		}
		ports[i] = p
	}
	c.Ports = ports
}

// ports checks the [[port]] tables; vip() checks vip.port.
func (v *validator) ports() {
	ps := v.c.Ports
	if len(ps) > maxPorts {
		v.bad("port", "%d [[port]] tables; at most %d are supported", len(ps), maxPorts)
		return
	}
	names, numbers := map[string]int{}, map[uint16]int{}
	required := 0
	for i, p := range ps {
		key := fmt.Sprintf("port[%d]", i)
		if why := portNameProblem(p.Name); why != "" {
			v.bad(key+".name", "%q %s", p.Name, why)
		} else if j, dup := names[p.Name]; dup {
			v.bad(key+".name", "%q is already the name of port[%d]", p.Name, j)
		} else {
			names[p.Name] = i
		}
		if p.Port == 0 {
			v.bad(key+".port", "must be between 1 and 65535")
		} else if j, dup := numbers[p.Port]; dup {
			v.bad(key+".port", "%d is already the port of port[%d]", p.Port, j)
		} else {
			numbers[p.Port] = i
		}
		if p.IsRequired() {
			required++
		}
		v.portHealth(key+".health", p.Health)
	}
	if len(ps) > 0 && required == 0 {
		v.bad("port[0].required", "no [[port]] is required: at least one must be (a node is ready, and holds the VIP, when every required port has a healthy backend)")
	}
}

// portNameProblem says what is wrong with a port name, "" if nothing. The
// name is a systemd unit instance and FileDescriptorName= (vipproxy-port@NAME.socket),
// so "vip" and "admin", the names of the shipped sockets, are taken.
func portNameProblem(name string) string {
	switch {
	case name == "":
		return "is empty: each [[port]] needs a name (e.g. \"api\", \"konnectivity\")"
	case len(name) > maxPortName:
		return fmt.Sprintf("is longer than %d characters", maxPortName)
	case name[0] < 'a' || name[0] > 'z' || strings.ContainsFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-')
	}):
		return "must be a lower-case letter followed by lower-case letters, digits or -"
	case name == "vip" || name == "admin":
		return "is taken: the shipped systemd sockets name their descriptors vip and admin"
	}
	return ""
}

// portHealth checks a port's health table. Problems it shares with
// [health] (inherited keys) are reported once, at [health].
func (v *validator) portHealth(key string, h Health) {
	if h == v.c.Health {
		return
	}
	sub := &validator{c: v.c, files: v.files}
	sub.checkHealth(key, h)
	top := &validator{c: v.c, files: v.files}
	top.checkHealth("health", v.c.Health)
	seen := map[string]bool{}
	for _, e := range top.errs {
		seen[strings.TrimPrefix(e.Key, "health")+": "+e.Reason] = true
	}
	for _, e := range sub.errs {
		if !seen[strings.TrimPrefix(e.Key, key)+": "+e.Reason] {
			v.errs = append(v.errs, e)
		}
	}
}

// backendHost checks a backend address in a config with [[port]] tables:
// a host (IP literal or DNS name) without port, which must not loop into
// our own listeners at any port's backend_port. It returns a canonical
// form for duplicate detection.
func (v *validator) backendHost(key, addr string) (string, bool) {
	if _, port, err := net.SplitHostPort(addr); err == nil {
		v.bad(key, "%q has a port (%s): with [[port]] tables a backend is a host, and each [[port]]'s backend_port says where it is reached", addr, port)
		return "", false
	}
	host, ok := unbracket(addr)
	if !ok {
		v.bad(key, "%q: brackets go around an IPv6 address, both of them (\"[2001:db8::1]\"), or none", addr)
		return "", false
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		if !isDNSName(host) {
			v.bad(key, "%q is neither an IP address nor a DNS name", addr)
			return "", false
		}
		return strings.ToLower(strings.TrimSuffix(host, ".")), true
	}
	ip = ip.Unmap().WithZone("")
	if ip.IsMulticast() || ip.IsUnspecified() {
		v.bad(key, "%q is not a unicast address", addr)
		return "", false
	}
	for _, p := range v.c.Ports {
		if l, loops := v.c.loopsInto(netip.AddrPortFrom(ip, p.BackendPort)); loops {
			v.bad(key, "%q at port %s's backend_port %d reaches %s: the proxy would connect to itself", addr, p.Name, p.BackendPort, l)
			return "", false
		}
	}
	return ip.String(), true
}

// unbracket takes the brackets off a host: both or none, and only around
// an IPv6 address. Trimming each one alone passed "[2001:db8::1" and
// "[cp1.example.com]", typos that then labelled logs and metrics.
func unbracket(host string) (string, bool) {
	inner, open := strings.CutPrefix(host, "[")
	inner, closed := strings.CutSuffix(inner, "]")
	if !open && !closed {
		return host, true
	}
	ip, err := netip.ParseAddr(inner)
	return inner, open && closed && err == nil && ip.Is6()
}

package config

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vipproxy/vipproxy/service/discovery"
	"github.com/vipproxy/vipproxy/service/regularfile"
)

// Bounds that keep a typo from turning into a denial of service.
const (
	maxRiseFall     = 100
	maxDialAttempts = 100
	maxPEMFile      = 1 << 20
	// maxBackends bounds the [[backend]] tables. Each backend is checked
	// on every port (up to 16) and keeps 2 descriptors per port from the
	// client connections (proxy.DerivedMaxConnections): 256 of them on 16
	// ports keep 8192 of the shipped unit's LimitNOFILE=65536, leaving
	// room for tens of thousands of clients. A 1 MiB file held 24,712
	// backends; with 450 and `ulimit -n 1024` the derived connection cap
	// was 1.
	maxBackends = 256
)

// validator collects every problem; each rule is one short method and
// changes nothing.
type validator struct {
	c     *Config
	files Files // which files the rules open (see FilesFor)
	errs  Errors
}

func (v *validator) bad(key, format string, args ...any) {
	v.errs = append(v.errs, &Error{File: v.c.Path, Key: key, Reason: fmt.Sprintf(format, args...)})
}

// rules are every check, in the order of the file's tables.
func (v *validator) rules() []func() {
	return []func(){
		v.vip, v.nodeLocal, v.ports, v.backends, v.balance, v.health, v.timeouts, v.limits,
		v.durations, v.admin, v.listenerClash, v.network, v.uplinks, v.keepalived, v.vrrp, v.modeTables, v.bgp, v.discovery,
		v.rendered,
	}
}

// uplinks: an IPv4 VIP needs an uplink whose ARP sysctls are fixed (IPv6
// neighbour discovery has no ARP flux), or every node answers ARP for it.
// A loopback VIP never leaves the host.
func (v *validator) uplinks() {
	if len(v.c.Network.Uplinks) > 0 || !v.c.VIP.Mode.UsesVIPLink() {
		return
	}
	for _, a := range v.c.VIP.Addresses {
		if a.Is4() && !a.IsLoopback() {
			v.bad("network.uplinks", "the IPv4 VIP %s needs at least one uplink interface (its ARP sysctls are set there)", a)
			return
		}
	}
}

// nodeLocal: a node-local VIP serves this node alone, so it is a loopback
// address (nothing else would keep it off the network: no VRRP decides who
// holds it), and no uplink gets ARP sysctls for it.
func (v *validator) nodeLocal() {
	if v.c.VIP.Mode != ModeNodeLocal {
		return
	}
	for i, a := range v.c.VIP.Addresses {
		if !a.IsLoopback() {
			v.bad(fmt.Sprintf("vip.addresses[%d]", i), "%s is not a loopback address: vip.mode = %q serves this node only; use one such as 127.0.0.1 (the kubelet's kubeconfig names it)", a, ModeNodeLocal)
		}
	}
	if len(v.c.Network.Uplinks) > 0 {
		v.bad("network.uplinks", "vip.mode = %q sets no ARP sysctls (its VIP never leaves the node): remove network.uplinks", ModeNodeLocal)
	}
}

func (v *validator) vip() {
	vip := v.c.VIP
	if len(vip.Addresses) == 0 {
		v.bad("vip.addresses", "at least one VIP address is required")
		return
	}
	seen := map[netip.Addr]bool{}
	ipv4 := 0
	for i, a := range vip.Addresses {
		key := fmt.Sprintf("vip.addresses[%d]", i)
		switch {
		case a.Is4In6():
			v.bad(key, "%s is an IPv4-mapped IPv6 address: write %s", a, a.Unmap())
		case a.Zone() != "":
			v.bad(key, "%s has a zone; a VIP cannot be link-local", a)
		case !a.IsGlobalUnicast() && !a.IsLoopback():
			v.bad(key, "%s is not a unicast address", a)
		case seen[a]:
			v.bad(key, "%s is listed twice", a)
		}
		seen[a] = true
		if a.Is4() {
			ipv4++
		}
	}
	if ipv4 > 1 {
		v.bad("vip.addresses", "at most one IPv4 VIP is supported, found %d", ipv4)
	}
	switch {
	case len(v.c.Ports) > 0 && vip.Port != 0:
		v.bad("vip.port", "is set together with [[port]] tables: move port %d into a [[port]] (each port the VIP serves is one [[port]])", vip.Port)
	case len(v.c.Ports) == 0 && vip.Port == 0:
		v.bad("vip.port", "must be between 1 and 65535")
	}
}

func (v *validator) backends() {
	bs := v.c.Backends
	if len(bs) == 0 {
		v.bad("backend", "at least one [[backend]] is required")
		return
	}
	if len(bs) > maxBackends {
		v.bad("backend", "%d [[backend]] tables; at most %d are supported: a control plane runs 3 to 7 apiservers (etcd's quorum), and each backend costs a health check per port and descriptors kept from clients (discovery.enable finds the apiservers instead)", len(bs), maxBackends)
		return
	}
	addrs := map[string]int{}
	names := map[string]int{}
	for i, b := range bs {
		key := fmt.Sprintf("backend[%d]", i)
		check := v.backendAddress
		if len(v.c.Ports) > 0 {
			check = v.backendHost
		}
		canon, ok := check(key+".address", b.Address)
		if ok {
			if j, dup := addrs[canon]; dup {
				v.bad(key+".address", "%q is the same backend as backend[%d]", b.Address, j)
			} else {
				addrs[canon] = i
			}
		} else if b.Name == b.Address {
			continue // the name is the address (derived): one mistake, said once
		}
		if b.Name == "" || strings.TrimSpace(b.Name) != b.Name || strings.ContainsFunc(b.Name, isControl) {
			v.bad(key+".name", "%q is empty or has surrounding spaces or control characters", b.Name)
		} else if j, dup := names[b.Name]; dup {
			v.bad(key+".name", "%q is already the name of backend[%d]", b.Name, j)
		} else {
			names[b.Name] = i
		}
	}
}

// backendAddress checks one backend host:port and returns a canonical
// form for duplicate detection (IPs in one spelling, names lower-cased,
// ports without leading zeros).
func (v *validator) backendAddress(key, addr string) (string, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.bad(key, "%q is not host:port", addr)
		return "", false
	}
	if _, ok := unbracket(strings.TrimSuffix(addr, ":"+port)); !ok {
		v.bad(key, "%q: brackets go around an IPv6 address, both of them (\"[2001:db8::1]:6443\"), or none", addr)
		return "", false
	}
	p, ok := parsePort(port)
	if !ok || p == 0 {
		v.bad(key, "%q has no valid port (1..65535, digits only)", addr)
		return "", false
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		if !isDNSName(host) {
			v.bad(key, "%q: %q is neither an IP address nor a DNS name", addr, host)
			return "", false
		}
		name := strings.ToLower(strings.TrimSuffix(host, "."))
		return net.JoinHostPort(name, strconv.Itoa(int(p))), true
	}
	ip = ip.Unmap().WithZone("")
	dst := netip.AddrPortFrom(ip, p)
	if l, loops := v.c.loopsInto(dst); loops {
		v.bad(key, "%q reaches %s: the proxy would connect to itself", addr, l)
		return "", false
	}
	if ip.IsMulticast() || ip.IsUnspecified() {
		v.bad(key, "%q is not a unicast address", addr)
		return "", false
	}
	return dst.String(), true
}

// parsePort reads a port as the dialer and the listener do: decimal digits
// only ("+17001" passes Atoi but no dial), leading zeros allowed.
func parsePort(s string) (uint16, bool) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	p, err := strconv.ParseUint(s, 10, 16)
	return uint16(p), err == nil
}

func (v *validator) balance() {
	b := v.c.Balance
	if b.DialAttempts < 1 || b.DialAttempts > maxDialAttempts {
		v.bad("balance.dial_attempts", "%d is out of range (1..%d)", b.DialAttempts, maxDialAttempts)
	}
}

func (v *validator) health() { v.checkHealth("health", v.c.Health) }

// checkHealth checks a health table at key: [health], or a port's
// (port[1].health), which is [health] with its own keys replaced.
func (v *validator) checkHealth(key string, h Health) {
	v.duration(key+".interval", "health.interval", h.Interval)
	v.duration(key+".timeout", "health.timeout", h.Timeout)
	if h.Timeout.Duration > h.Interval.Duration {
		v.bad(key+".timeout", "%s is longer than %s.interval (%s)", h.Timeout, key, h.Interval)
	}
	if h.Rise < 1 || h.Rise > maxRiseFall {
		v.bad(key+".rise", "%d is out of range (1..%d)", h.Rise, maxRiseFall)
	}
	if h.Fall < 1 || h.Fall > maxRiseFall {
		v.bad(key+".fall", "%d is out of range (1..%d)", h.Fall, maxRiseFall)
	}
	if !strings.HasPrefix(h.Path, "/") || strings.ContainsFunc(h.Path, isSpaceOrControl) {
		v.bad(key+".path", "%q must start with / and contain no spaces", h.Path)
	}
	if h.ExpectStatus < 100 || h.ExpectStatus > 599 {
		v.bad(key+".expect_status", "%d is not an HTTP status (100..599)", h.ExpectStatus)
	}
	v.serverName(key+".server_name", h.ServerName)
	v.healthTLS(key, h)
}

// serverName: a TLS name to send and verify is empty, a DNS name or an IP
// address (no CR/LF or spaces, which would reach the request).
func (v *validator) serverName(key, sn string) {
	if sn == "" || isDNSName(sn) {
		return
	}
	if _, err := netip.ParseAddr(sn); err != nil {
		v.bad(key, "%q is neither a DNS name nor an IP address", sn)
	}
}

// healthTLS checks the certificate files now rather than at the first
// health check, so a typo fails `vipproxy check` and a reload.
func (v *validator) healthTLS(key string, h Health) {
	if h.CAFile != "" {
		v.caFile(key+".ca_file", h.CAFile)
	}
	switch {
	case h.CertFile != "" && h.KeyFile == "":
		v.bad(key+".key_file", "must be set when %s.cert_file is", key)
	case h.KeyFile != "" && h.CertFile == "":
		v.bad(key+".cert_file", "must be set when %s.key_file is", key)
	case h.CertFile != "":
		v.clientCert(key, h.CertFile, h.KeyFile)
	}
	v.healthToken(key, h)
}

// healthToken: a bearer token goes in an https request, only to an
// apiserver whose certificate is verified (else anyone on the path could
// take it), and the file must hold one now.
func (v *validator) healthToken(key string, h Health) {
	switch {
	case h.TokenFile == "":
	case h.Type != CheckHTTPS:
		v.bad(key+".token_file", "is sent in an HTTP request: only with type = \"https\" (this check is %q)", h.Type)
	case h.CAFile == "":
		v.bad(key+".token_file", "needs %s.ca_file: a bearer token is sent only to an apiserver whose certificate is verified", key)
	case v.credential(key+".token_file", h.TokenFile):
	default:
		if tok, err := readSmallFile(h.TokenFile, maxPEMFile); err != nil {
			v.bad(key+".token_file", "%v", err)
		} else if len(bytes.TrimSpace(tok)) == 0 {
			v.bad(key+".token_file", "%s is empty", h.TokenFile)
		}
	}
}

// caFile wants a readable file with at least one PEM certificate.
func (v *validator) caFile(key, path string) {
	if v.credential(key, path) {
		return
	}
	pem, err := readSmallFile(path, maxPEMFile)
	if err != nil {
		v.bad(key, "%v", err)
	} else if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		v.bad(key, "%s holds no PEM certificate", path)
	}
}

// clientCert wants table.cert_file and table.key_file to be a key pair.
func (v *validator) clientCert(table, certFile, keyFile string) {
	certCred, keyCred := v.credential(table+".cert_file", certFile), v.credential(table+".key_file", keyFile)
	if certCred || keyCred {
		return
	}
	cert, err := readSmallFile(certFile, maxPEMFile)
	if err != nil {
		v.bad(table+".cert_file", "%v", err)
		return
	}
	key, err := readSmallFile(keyFile, maxPEMFile)
	if err != nil {
		v.bad(table+".key_file", "%v", err)
		return
	}
	if _, err := tls.X509KeyPair(cert, key); err != nil {
		v.bad(table+".cert_file", "%s with %s: %v", certFile, keyFile, err)
	}
}

func (v *validator) timeouts() {
	t := v.c.Timeouts
	if t.UserTimeout.Duration > 0 && t.UserTimeout.Duration < time.Millisecond {
		v.bad("timeouts.user_timeout", "%s is below the kernel's unit of 1ms (0 turns it off)", t.UserTimeout)
	}
}

func (v *validator) limits() {
	l := v.c.Limits
	if l.MaxConnections < 0 {
		v.bad("limits.max_connections", "%d is negative (0 derives the cap from the descriptor limit)", l.MaxConnections)
	}
}

func (v *validator) admin() {
	a := v.c.Admin
	if a.Listen == "" {
		return
	}
	if path, ok := strings.CutPrefix(a.Listen, "unix:"); ok {
		if len(path) > 107 { // absolute: its field type (fields.go)
			v.bad("admin.listen", "%q: a unix socket needs an absolute path of at most 107 bytes", a.Listen)
		}
		return
	}
	host, port, err := net.SplitHostPort(a.Listen)
	if err != nil {
		v.bad("admin.listen", "%q is neither host:port nor unix:/path", a.Listen)
		return
	}
	if _, ok := parsePort(port); !ok {
		v.bad("admin.listen", "%q has no valid port (0..65535, digits only)", a.Listen)
		return
	}
	if isLoopbackHost(host) || a.AllowRemote {
		return
	}
	v.bad("admin.listen", "%q is not a loopback address; set admin.allow_remote = true to expose it", a.Listen)
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

func (v *validator) network() {
	// Names and paths have their field types (fields.go).
	n := v.c.Network
	seen := map[string]bool{}
	for i, u := range n.Uplinks {
		key := fmt.Sprintf("network.uplinks[%d]", i)
		switch u {
		case "all", "default", "lo":
			v.bad(key, "%q is not allowed: ARP sysctls are set per uplink, never on all, default or lo", u)
		}
		if u == n.Interface {
			v.bad(key, "%q is the VIP interface (network.interface), not an uplink", u)
		}
		if seen[u] {
			v.bad(key, "%q is listed twice", u)
		}
		seen[u] = true
	}
	if d := n.SocketDropIn; filepath.Base(filepath.Dir(d)) != "vipproxy.socket.d" {
		v.bad("network.socket_dropin", "%q must be an absolute path to a .conf file in a vipproxy.socket.d directory", d)
	}
}

// checkInterfaceName accepts a name the kernel takes (dev_valid_name: at
// most 15 bytes, no / : or whitespace, not . or ..) that also means the
// same to every file it is written into: networkd's [Match] Name= reads
// globs and a leading ! ("*" would match every link), sysctl.d reads the
// key up to "=", and systemd refuses an all-digit name (an ifindex). So only
// letters, digits, - _ and . are allowed.
func checkInterfaceName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("an interface name is required")
	case len(name) > 15:
		return fmt.Errorf("%q is longer than 15 bytes, the kernel's limit for interface names", name)
	case name == "." || name == "..":
		return fmt.Errorf("%q is not a valid interface name", name)
	case strings.Trim(name, "0123456789") == "":
		return fmt.Errorf("%q is all digits, which systemd reads as an interface index", name)
	case strings.ContainsFunc(name, notIfNameRune):
		return fmt.Errorf("%q is not an interface name: only letters, digits, - _ and . (no globs, ! or spaces)", name)
	}
	return nil
}

func notIfNameRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
}

// keepalivedWord is what keepalived.conf reads as one word (an instance
// name, an interface): "vip/proxy" or "a{b" would end or break the block.
func keepalivedWord(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_.:-", r))
	})
}

func (v *validator) keepalived() {
	if !v.c.VIP.Mode.UsesKeepalived() {
		return // its keys are not read
	}
	k := v.c.Keepalived
	if k.RouterID < 1 || k.RouterID > 255 {
		v.bad("keepalived.router_id", "%d is out of range (1..255)", k.RouterID)
	}
	if k.Priority < 1 || k.Priority > 254 {
		v.bad("keepalived.priority", "%d is out of range (1..254; 255 is reserved for the address owner)", k.Priority)
	}
	if k.AdvertInt < 1 || k.AdvertInt > 255 {
		v.bad("keepalived.advert_int", "%d is out of range (1..255 seconds)", k.AdvertInt)
	}
	if len(k.AuthPass) > 8 {
		v.bad("keepalived.auth_pass", "must be at most 8 characters (VRRP PASS auth; keepalived would truncate a longer one)")
	}
	if p := ProbeConfigPath(v.c.Path); !onScriptLine(p) {
		v.bad("keepalived.probe_command", "the config path %q contains a control character, a quote or a backslash; the vrrp_script line cannot carry it", p)
	}
}

// vrrp checks the VRRP instance against the VIPs: it needs an interface,
// and speaks the first VIP's family (VRRPv2 for IPv4, VRRPv3 for IPv6).
func (v *validator) vrrp() {
	if !v.c.VIP.Mode.UsesKeepalived() {
		return
	}
	k := v.c.Keepalived
	if k.Interface == "" {
		// Derived from the first uplink: an empty one is said there.
		if len(v.c.Network.Uplinks) == 0 {
			v.bad("keepalived.interface", "no VRRP interface: set keepalived.interface or network.uplinks")
		}
	} // a name of its own has its field type (fields.go), an uplink is judged as one
	if len(v.c.VIP.Addresses) == 0 {
		return
	}
	first := v.c.VIP.Addresses[0]
	sameFamily := func(key, s string) {
		switch ip, err := netip.ParseAddr(s); {
		case err != nil:
			v.bad(key, "%q is not an IP address", s)
		case ip.Is4() != first.Is4():
			v.bad(key, "%s is not of the same family as the first VIP %s", ip, first)
		}
	}
	switch {
	case k.UnicastSrcIP != "" && len(k.UnicastPeers) == 0:
		v.bad("keepalived.unicast_src_ip", "is set without keepalived.unicast_peers: keepalived ignores it and speaks multicast; list the peers or remove it")
	case k.UnicastSrcIP != "":
		sameFamily("keepalived.unicast_src_ip", k.UnicastSrcIP)
	}
	for i, p := range k.UnicastPeers {
		sameFamily(fmt.Sprintf("keepalived.unicast_peers[%d]", i), p)
	}
	if k.AuthPass != "" && !first.Is4() {
		v.bad("keepalived.auth_pass", "authentication exists only in VRRPv2 (IPv4); an IPv6 instance speaks VRRPv3")
	}
}

// ProbeScript is the command line keepalived's vrrp_script runs: the
// probe command and the config file the probe reads.
func (c *Valid) ProbeScript() string {
	return c.Keepalived.ProbeCommand + " --config " + scriptWord(ProbeConfigPath(c.Path))
}

// keepalived reads a vrrp_script line as a quoted string with shell-like
// escapes and splits it at blanks, single quotes grouping: a backslash
// begins an escape, and an unmatched single quote makes keepalived drop
// the script and with it the instance's tracking of the proxy
// (keepalived_kernel_test.go). onScriptLine says whether a path can be one
// word of that line, scriptWord writes it as one: single-quoted when it
// holds a space.
func onScriptLine(path string) bool {
	return !strings.ContainsFunc(path, isControl) && !strings.ContainsAny(path, `"'\`)
}

func scriptWord(path string) string {
	if strings.Contains(path, " ") {
		return "'" + path + "'"
	}
	return path
}

// ProbeConfigPath is the config file keepalived's probe reads: absolute,
// so keepalived's working directory does not matter.
func ProbeConfigPath(path string) string {
	if path == "" {
		return DefaultPath
	}
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// isDNSName reports whether host is a syntactically valid DNS name. A name
// whose last label is all digits is refused: it is a mistyped IP address
// ("10.0.0.256", "127.1") that a resolver might read in surprising ways.
func isDNSName(host string) bool {
	host = strings.TrimSuffix(host, ".")
	if host == "" || len(host) > 253 {
		return false
	}
	labels := strings.Split(host, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	last := labels[len(labels)-1]
	return strings.Trim(last, "0123456789") != ""
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

func isSpaceOrControl(r rune) bool { return r == ' ' || isControl(r) }

// Bounds of the [discovery] table.
const (
	maxDiscovered = 1000
)

func (v *validator) discovery() {
	d := v.c.Discovery
	if d.MaxBackends < 1 || d.MaxBackends > maxDiscovered {
		v.bad("discovery.max_backends", "%d is out of range (1..%d)", d.MaxBackends, maxDiscovered)
	}
	v.serverName("discovery.server_name", d.ServerName)
	v.discoveryCredentials()
}

// discoveryCredentials wants one way to authenticate, and its files
// readable now, so that a typo fails `vipproxy check` and a reload.
func (v *validator) discoveryCredentials() {
	d := v.c.Discovery
	before := len(v.errs)
	switch {
	case d.Kubeconfig != "" && (d.CAFile != "" || d.CertFile != "" || d.KeyFile != "" || d.TokenFile != ""):
		v.bad("discovery.kubeconfig", "set either kubeconfig or ca_file with cert_file/key_file or token_file, not both")
	case (d.CertFile == "") != (d.KeyFile == ""):
		v.bad("discovery.cert_file", "cert_file and key_file go together")
	case !d.Enable:
		return
	case d.Kubeconfig == "" && d.CertFile == "" && d.TokenFile == "":
		v.bad("discovery.enable", "needs credentials: kubeconfig, or ca_file with cert_file + key_file or token_file")
	case d.Kubeconfig == "" && d.CAFile == "":
		v.bad("discovery.ca_file", "is required without a kubeconfig: the cluster CA verifies the apiservers")
	}
	if len(v.errs) > before {
		return
	}
	// As health's: a CA with a certificate, a key pair that matches.
	if d.CAFile != "" {
		v.caFile("discovery.ca_file", d.CAFile)
	}
	if d.CertFile != "" {
		v.clientCert("discovery", d.CertFile, d.KeyFile)
	}
	if d.TokenFile != "" && !v.credential("discovery.token_file", d.TokenFile) {
		if _, err := readSmallFile(d.TokenFile, maxPEMFile); err != nil {
			v.bad("discovery.token_file", "%v", err)
		}
	}
	// The kubeconfig is parsed and every file it names read as discovery
	// reads them (again at each request: rotation), so that `check` and a
	// reload fail on what the watcher would fail on.
	if d.Kubeconfig != "" && !v.credential("discovery.kubeconfig", d.Kubeconfig) {
		if err := (discovery.Credentials{Kubeconfig: d.Kubeconfig, ServerName: d.ServerName}).Check(); err != nil {
			v.bad("discovery.kubeconfig", "%v", err)
		}
	}
	v.stateFile()
}

// stateFile refuses a last-known-set file that is not a regular file (a
// FIFO there blocked the start): one vipproxy wrote is always regular.
func (v *validator) stateFile() {
	d := v.c.Discovery
	if d.StateDir == "" {
		return
	}
	err := regularfile.Check(filepath.Join(d.StateDir, discovery.StateFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		v.bad("discovery.state_dir", "%v: remove it, vipproxy writes it again", err)
	}
}

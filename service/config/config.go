// Package config loads and validates vipproxy's TOML configuration file,
// the single source of truth for the daemon, the host network setup, the
// keepalived wiring and the systemd socket drop-in.
package config

import (
	"net/netip"
	"os"
	"time"
)

// DefaultPath is where the daemon and every subcommand look for the config.
const DefaultPath = "/etc/vipproxy/vipproxy.toml"

// Config is the whole configuration file after defaults are applied.
type Config struct {
	// Path is the file this config was read from (not a TOML key).
	Path string `toml:"-"`

	VIP      VIP       `toml:"vip"`
	Backends []Backend `toml:"backend"`
	// Ports are the [[port]] tables; none: one port on vip.port (see ServedPorts).
	Ports      []Port     `toml:"port"`
	Balance    Balance    `toml:"balance"`
	Health     Health     `toml:"health"`
	Timeouts   Timeouts   `toml:"timeouts"`
	Limits     Limits     `toml:"limits"`
	Admin      Admin      `toml:"admin"`
	Network    Network    `toml:"network"`
	Keepalived Keepalived `toml:"keepalived"`
	BGP        BGP        `toml:"bgp"`
	Log        Log        `toml:"log"`
	Discovery  Discovery  `toml:"discovery"`
}

// VIP is the virtual address clients connect to.
type VIP struct {
	// Addresses holds one IPv4 and/or one or more IPv6 VIPs; all serve
	// the same ports.
	Addresses []netip.Addr `toml:"addresses"`
	// Port is the one port of a config without [[port]] tables; with them
	// it is 0 (not written), each [[port]] naming its own.
	Port uint16 `toml:"port,omitempty"`
	// Mode says how this node holds the VIP (see VIPMode).
	Mode VIPMode `toml:"mode"`
	// ReusePort binds every VIP listener with SO_REUSEPORT, so that it
	// shares its port with a local listener on every address that sets it
	// too, as the same user: RKE2's kube-apiserver, which RKE2 always
	// binds to *:6443, started with --permit-port-sharing=true. The kernel
	// gives a connection to the listener bound to its exact address, so
	// the VIP's still reach vipproxy alone. Off by default: one socket,
	// one owner, a second vipproxy fails to bind instead of sharing.
	ReusePort bool `toml:"reuse_port"`
}

// Backend is one apiserver.
type Backend struct {
	// Name labels logs and metrics; defaults to Address.
	Name string `toml:"name"`
	// Address is host:port, or with [[port]] tables a host alone (each
	// [[port]] gives the port, see Port.BackendAddress); host is an IP
	// literal or a DNS name.
	Address string `toml:"address"`
}

// Balance says how a backend is picked and what happens when one fails.
type Balance struct {
	Algorithm Algorithm `toml:"algorithm"`
	// DialAttempts bounds how many backends one client connection tries.
	DialAttempts int `toml:"dial_attempts"`
	// CloseOnDown closes connections to a backend when it is marked down,
	// so long watches reconnect to a healthy apiserver at once.
	CloseOnDown bool `toml:"close_on_down"`
}

// Health configures the active health checks, the same for every backend.
type Health struct {
	Type     CheckKind `toml:"type"`
	Interval Duration  `toml:"interval"`
	Timeout  Duration  `toml:"timeout"`
	// Rise consecutive successes mark a down backend up; Fall consecutive
	// failures mark an up backend down.
	Rise int `toml:"rise"`
	Fall int `toml:"fall"`
	// Path and ExpectStatus apply to https checks.
	Path         string `toml:"path"`
	ExpectStatus int    `toml:"expect_status"`
	// CAFile verifies the backend certificate (tls, https); empty skips verification.
	CAFile string `toml:"ca_file"`
	// CertFile and KeyFile are a client certificate, TokenFile a bearer
	// token (https only), for clusters that refuse anonymous /readyz
	// (--anonymous-auth=false: k3s, RKE2, CIS-hardened kubeadm). The files
	// are read again when they change (rotation). See HasCredentials.
	CertFile   string `toml:"cert_file"`
	KeyFile    string `toml:"key_file"`
	TokenFile  string `toml:"token_file"`
	ServerName string `toml:"server_name"`
	// AcceptUnverified is the operator's word that a check whose
	// readiness is unverified (see HasCredentials) is what they want:
	// `vipproxy doctor` then warns about it instead of failing.
	AcceptUnverified bool `toml:"accept_unverified"`
}

// UnverifiedFails reports whether doctor fails a port whose backends
// pass its check with readiness unverified: an apiserver that refuses the
// check (401/403) keeps receiving clients when its /readyz fails (etcd
// down), which the operator must fix (anonymous /readyz, or credentials)
// or accept with accept_unverified.
func (h Health) UnverifiedFails() bool { return !h.AcceptUnverified }

// HasCredentials reports whether the check proves who it is. Without
// credentials an https check that an apiserver refuses with 401 or 403
// has still shown an apiserver answering HTTP over TLS: it passes, but
// readiness is unverified. With them, a refusal fails the check.
func (h Health) HasCredentials() bool { return h.CertFile != "" || h.TokenFile != "" }

// Timeouts bound every wait the proxy does.
type Timeouts struct {
	Dial Duration `toml:"dial"`
	// KeepAlive is the TCP keepalive idle time on both sides.
	KeepAlive Duration `toml:"keepalive"`
	// UserTimeout is TCP_USER_TIMEOUT on both sides: unacknowledged data
	// older than this kills the connection.
	UserTimeout Duration `toml:"user_timeout"`
	// Drain is how long open connections may finish after SIGTERM.
	Drain Duration `toml:"drain"`
	// DrainIdle closes, during that drain, a connection that has carried
	// no byte either way for this long: watches and idle keep-alive
	// connections would otherwise hold a restart for the whole drain, with
	// new connections waiting in the socket's backlog and keepalived's
	// probe failing. 0 waits for every connection.
	DrainIdle Duration `toml:"drain_idle"`
}

// Limits protect the node.
type Limits struct {
	// MaxConnections caps open client connections; 0 derives the cap
	// from the descriptor limit (RLIMIT_NOFILE), with descriptors kept
	// for health checks, the admin endpoint and reloads.
	MaxConnections int `toml:"max_connections"`
	// AcceptBackoffMax caps the pause after an accept error such as EMFILE.
	AcceptBackoffMax Duration `toml:"accept_backoff_max"`
}

// Admin is the HTTP endpoint for metrics, health and status.
type Admin struct {
	// Listen is "host:port" (loopback only unless AllowRemote), "unix:/path",
	// or "" to use only the systemd socket named "admin" if one is passed.
	Listen string `toml:"listen"`
	// AllowRemote permits a non-loopback Listen address.
	AllowRemote bool `toml:"allow_remote"`
	// EnableMutations turns on endpoints that change state (e.g. draining a backend).
	EnableMutations bool `toml:"enable_mutations"`
	// Strict makes a Listen that cannot bind end the daemon. By default the
	// proxy keeps serving the VIP without its admin endpoint and retries:
	// the VIP matters more than metrics.
	Strict bool `toml:"strict"`
}

// DefaultAdminListen is the admin endpoint's default address. Port 6449 is
// used by no Kubernetes distribution we checked (2026-12-01), unlike the
// ports around the apiserver's: kubeadm 6443, 2379-2381, 10248-10259;
// k3s 6444 (its apiserver behind the supervisor on 6443), 9345 in RKE2;
// k0s 9443, 8132-8133, 7443 (node-local LB); Talos 50000-50001 and
// KubePrism 7445; Canonical Kubernetes 6400; Calico 9099/9091.
const DefaultAdminListen = "127.0.0.1:6449"

// Network describes the host side: the dummy link holding the VIP and the
// uplinks whose ARP sysctls are tightened.
type Network struct {
	Interface string `toml:"interface"`
	// Uplinks get arp_ignore=1 and arp_announce=2; never "all" or "default".
	Uplinks []string `toml:"uplinks"`
	// NetworkdDir holds the .netdev and .network drop-ins.
	NetworkdDir string `toml:"networkd_dir"`
	NetdevFile  string `toml:"netdev_file"`
	NetworkFile string `toml:"network_file"`
	// SysctlFile is the sysctl.d drop-in (absolute path).
	SysctlFile string `toml:"sysctl_file"`
	// SocketDropIn is the vipproxy.socket.d drop-in with the ListenStream lines.
	SocketDropIn string `toml:"socket_dropin"`
	// AllowForeignCleanup accepts that the operator's systemd-networkd,
	// with ManageForeignRoutingPolicyRules= or ManageForeignRoutes= at
	// yes, deletes the rules and routes it did not make when `network
	// apply` reloads it. false (the default): apply refuses and names the
	// networkd.conf setting that spares them.
	AllowForeignCleanup bool `toml:"allow_foreign_cleanup"`
}

// Keepalived feeds `vipproxy keepalived`, which renders the VRRP instance.
type Keepalived struct {
	Instance     string    `toml:"instance"`
	Interface    string    `toml:"interface"` // defaults to the first uplink
	RouterID     int       `toml:"router_id"`
	Priority     int       `toml:"priority"`
	State        VRRPState `toml:"state"`
	AdvertInt    int       `toml:"advert_int"`
	UnicastSrcIP string    `toml:"unicast_src_ip"`
	UnicastPeers []string  `toml:"unicast_peers"`
	AuthPass     string    `toml:"auth_pass"`
	// ProbeCommand is what the vrrp_script runs; by default this very
	// binary (see selfProbe).
	ProbeCommand string `toml:"probe_command"`
}

// Discovery follows the cluster's `kubernetes` EndpointSlices to find the
// apiservers beyond the static [[backend]] list, which stays the seed and
// the fallback.
type Discovery struct {
	Enable bool `toml:"enable"`
	// Kubeconfig, or CAFile with CertFile+KeyFile and/or TokenFile, are the
	// credentials; the files are read again for each connection (rotation).
	Kubeconfig string `toml:"kubeconfig"`
	CAFile     string `toml:"ca_file"`
	CertFile   string `toml:"cert_file"`
	KeyFile    string `toml:"key_file"`
	TokenFile  string `toml:"token_file"`
	// ServerName is the TLS name the apiservers are verified against; empty:
	// the kubeconfig's tls-server-name, else "kubernetes".
	ServerName string `toml:"server_name"`
	// Resync is how long one watch lasts before the set is listed again.
	Resync Duration `toml:"resync"`
	// Grace is how long a backend the cluster no longer lists keeps its
	// open connections (it takes no new ones).
	Grace Duration `toml:"grace"`
	// MaxBackends caps the discovered set, draining members included; more
	// endpoints are refused.
	MaxBackends int `toml:"max_backends"`
	// AllowLoopback accepts discovered endpoints on 127.0.0.0/8 and ::1.
	// A real apiserver never publishes one (it refuses to); only stand-in
	// apiservers in tests do. Off, such an endpoint is refused unseen.
	AllowLoopback bool `toml:"allow_loopback"`
	// StateDir keeps the last known set (discovered.json); systemd's
	// $STATE_DIRECTORY wins when set. Empty keeps nothing.
	StateDir string `toml:"state_dir"`
}

// Log sets the log level: debug, info, warn or error.
type Log struct {
	Level LogLevel `toml:"level"`
}

// Duration is a time.Duration written as a Go duration string ("1s", "250ms").
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := time.ParseDuration(string(text))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.Duration.String()), nil }

// Default returns the configuration used for every key the file leaves out.
func Default() Config {
	return Config{
		VIP:     VIP{Port: 6443, Mode: ModeVRRP},
		Balance: Balance{Algorithm: RoundRobin, DialAttempts: 3, CloseOnDown: true},
		Health: Health{
			Type: CheckHTTPS, Interval: Duration{time.Second}, Timeout: Duration{time.Second},
			Rise: 2, Fall: 2, Path: "/readyz", ExpectStatus: 200,
		},
		Timeouts: Timeouts{
			Dial: Duration{2 * time.Second}, KeepAlive: Duration{15 * time.Second},
			UserTimeout: Duration{30 * time.Second}, Drain: Duration{30 * time.Second},
			DrainIdle: Duration{3 * time.Second},
		},
		Limits: Limits{AcceptBackoffMax: Duration{time.Second}},
		Admin:  Admin{Listen: DefaultAdminListen},
		Network: Network{
			Interface:    "dummyvip0",
			NetworkdDir:  "/etc/systemd/network",
			NetdevFile:   "60-vipproxy.netdev",
			NetworkFile:  "60-vipproxy.network",
			SysctlFile:   "/etc/sysctl.d/60-vipproxy.conf",
			SocketDropIn: "/etc/systemd/system/vipproxy.socket.d/50-listen.conf",
		},
		Keepalived: Keepalived{
			Instance: "vipproxy", RouterID: 51, Priority: 100, State: VRRPBackup, AdvertInt: 1,
			ProbeCommand: selfProbe(),
		},
		BGP: BGP{Interface: DefaultBGPInterface, HoldTime: defaultHoldTime},
		Log: Log{Level: LogInfo},
		Discovery: Discovery{
			Resync: Duration{5 * time.Minute}, Grace: Duration{30 * time.Second},
			MaxBackends: 16, StateDir: "/var/lib/vipproxy",
		},
	}
}

// selfProbe is the default probe_command: `probe` of the vipproxy binary
// that reads the config, wherever it is installed (/usr/bin on Debian, a
// store path on NixOS, which has no /usr/bin/vipproxy). When the path is
// unknown, or keepalived's script line cannot carry it, the default is
// empty and validation asks for probe_command.
func selfProbe() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return probeCommandOf(exe)
}

func probeCommandOf(exe string) string {
	if !onScriptLine(exe) {
		return ""
	}
	return scriptWord(exe) + " probe"
}

package config

import (
	"fmt"
	"log/slog"
	"strings"
)

// The enumerated keys. Each is a type whose names are listed once, here;
// decoding refuses any other name, so no other package checks them again.
// A new algorithm or check kind is a name here plus its implementation
// (balance/policy.go, health/probe.go), whose tests fail until both exist.

// Algorithm is balance.algorithm: how the pool picks a backend.
type Algorithm string

// Balancing algorithms.
const (
	RoundRobin       Algorithm = "round-robin"
	LeastConnections Algorithm = "least-connections"
	RandomTwoChoices Algorithm = "random-two-choices"
)

// Algorithms lists every algorithm, the default first.
var Algorithms = []Algorithm{RoundRobin, LeastConnections, RandomTwoChoices}

// CheckKind is health.type: what a health check does.
type CheckKind string

// Health check kinds.
const (
	CheckTCP   CheckKind = "tcp"
	CheckTLS   CheckKind = "tls"
	CheckHTTPS CheckKind = "https"
)

// CheckKinds lists every check kind.
var CheckKinds = []CheckKind{CheckTCP, CheckTLS, CheckHTTPS}

// VIPMode is vip.mode: how this node holds the VIP, and so which host
// setup it needs. What each mode needs is answered here (UsesKeepalived,
// UsesVIPLink, UsesBGP); the renderers and commands ask, never compare names.
type VIPMode string

// VIP modes.
const (
	// ModeVRRP: controller nodes; keepalived moves the VIP between them and
	// every node also holds it on the dummy link to serve it locally.
	ModeVRRP VIPMode = "vrrp"
	// ModeNodeLocal: worker-only nodes (Talos KubePrism, the k3s/RKE2 agent
	// load balancer, k0s node-local load balancing): the VIP is a loopback
	// address that only this node's kubelet and pods on the host network
	// use; no keepalived, no dummy link, no ARP sysctls.
	ModeNodeLocal VIPMode = "node-local"
	// ModeBGP: controller nodes in different racks or subnets: every ready
	// node holds the VIP on the dummy link and announces it by BGP (BIRD),
	// the routers spread clients over them (ECMP); no keepalived, no ARP
	// for the VIP on the uplinks.
	ModeBGP VIPMode = "bgp"
)

// VIPModes lists every mode, the default first.
var VIPModes = []VIPMode{ModeVRRP, ModeNodeLocal, ModeBGP}

// UsesKeepalived: the mode needs keepalived's VRRP instance and track script.
func (m VIPMode) UsesKeepalived() bool { return m == ModeVRRP }

// UsesVIPLink: the mode needs the dummy link holding the VIP and the
// uplink ARP sysctls (vipproxy network).
func (m VIPMode) UsesVIPLink() bool { return m != ModeNodeLocal }

// UsesBGP: the mode announces the VIP by BGP ([bgp], vipproxy bird and
// vipproxy announce).
func (m VIPMode) UsesBGP() bool { return m == ModeBGP }

func (m VIPMode) String() string { return string(m) }

// UnmarshalText accepts only the names in VIPModes.
func (m *VIPMode) UnmarshalText(text []byte) error { return oneOf(m, VIPModes, string(text)) }

// MarshalText writes the name.
func (m VIPMode) MarshalText() ([]byte, error) { return []byte(m), nil }

// LogLevel is log.level: the least severe messages that are logged.
type LogLevel string

// Log levels, as log/slog names them.
const (
	LogDebug LogLevel = "debug"
	LogInfo  LogLevel = "info"
	LogWarn  LogLevel = "warn"
	LogError LogLevel = "error"
)

// LogLevels lists every log level, the most verbose first.
var LogLevels = []LogLevel{LogDebug, LogInfo, LogWarn, LogError}

// VRRPState is keepalived.state: the state keepalived starts in.
type VRRPState string

// VRRP start states, as keepalived spells them.
const (
	VRRPBackup VRRPState = "BACKUP"
	VRRPMaster VRRPState = "MASTER"
)

// VRRPStates lists every VRRP start state, the default first.
var VRRPStates = []VRRPState{VRRPBackup, VRRPMaster}

func (a Algorithm) String() string { return string(a) }

// UnmarshalText accepts only the names in Algorithms.
func (a *Algorithm) UnmarshalText(text []byte) error { return oneOf(a, Algorithms, string(text)) }

// MarshalText writes the name.
func (a Algorithm) MarshalText() ([]byte, error) { return []byte(a), nil }

func (k CheckKind) String() string { return string(k) }

// UnmarshalText accepts only the names in CheckKinds.
func (k *CheckKind) UnmarshalText(text []byte) error { return oneOf(k, CheckKinds, string(text)) }

// MarshalText writes the name.
func (k CheckKind) MarshalText() ([]byte, error) { return []byte(k), nil }

func (l LogLevel) String() string { return string(l) }

// UnmarshalText accepts only the names in LogLevels.
func (l *LogLevel) UnmarshalText(text []byte) error { return oneOf(l, LogLevels, string(text)) }

// MarshalText writes the name.
func (l LogLevel) MarshalText() ([]byte, error) { return []byte(l), nil }

// Slog is the level as log/slog knows it.
func (l LogLevel) Slog() slog.Level {
	switch l {
	case LogDebug:
		return slog.LevelDebug
	case LogWarn:
		return slog.LevelWarn
	case LogError:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (s VRRPState) String() string { return string(s) }

// UnmarshalText accepts only the names in VRRPStates.
func (s *VRRPState) UnmarshalText(text []byte) error { return oneOf(s, VRRPStates, string(text)) }

// MarshalText writes the name.
func (s VRRPState) MarshalText() ([]byte, error) { return []byte(s), nil }

// choiceError is a name that is not one of the choices; decodeText reports
// it as it is.
type choiceError struct{ msg string }

func (e *choiceError) Error() string { return e.msg }

func oneOf[T ~string](dst *T, choices []T, s string) error {
	names := make([]string, len(choices))
	for i, c := range choices {
		if string(c) == s {
			*dst = c
			return nil
		}
		names[i] = string(c)
	}
	return &choiceError{fmt.Sprintf("%q is not one of %s", s, strings.Join(names, ", "))}
}

package admin

import (
	"os"
	"path/filepath"
	"strings"
)

// The control socket is a second, private door to the same handler: a unix
// socket (mode 0660) in the service's RuntimeDirectory (/run/vipproxy,
// owned by the service's user), which no other program can take.
// `vipproxy status`, `reload` and `doctor` ask it first, so that a clash
// on admin.listen's TCP port neither hides the daemon nor lets another
// process answer for it: they take its answer only from the daemon's own
// process (DialDaemon), and ask admin.listen over TCP only when the
// operator names it (--admin).
//
// The probe socket sits beside it for keepalived's track script, which runs
// as keepalived's script user (NixOS: a vrrp_script user; Debian: root, or
// keepalived_script with enable_script_security), not as the daemon's
// dynamic user: mode 0666 in a RuntimeDirectory of mode 0711 (enter, not
// list or create), serving /readyz and /healthz only. Any local user could
// already ask admin.listen's loopback port as much; the socket adds that
// only the daemon can hold it (a clash on admin.listen's port neither moves
// the VIP for nothing nor lets another process answer for a dead proxy),
// and works with admin.listen = "" or "unix:...".
const (
	ControlSocketName = "control.sock"
	ProbeSocketName   = "probe.sock"
	// DefaultControlSocket is where the daemon under the shipped unit
	// (RuntimeDirectory=vipproxy) puts it.
	DefaultControlSocket = "/run/" + "vipproxy/" + ControlSocketName
	DefaultProbeSocket   = "/run/" + "vipproxy/" + ProbeSocketName
)

// ControlSocketPath is the control socket's path from systemd's
// $RUNTIME_DIRECTORY (the first entry if there are several); "" without it.
func ControlSocketPath(getenv func(string) string) string {
	return runtimePath(getenv, ControlSocketName)
}

// ProbeSocketPath is the probe socket's path from $RUNTIME_DIRECTORY; ""
// without it.
func ProbeSocketPath(getenv func(string) string) string {
	return runtimePath(getenv, ProbeSocketName)
}

func runtimePath(getenv func(string) string, name string) string {
	dirs := getenv("RUNTIME_DIRECTORY")
	if dirs == "" {
		return ""
	}
	dir, _, _ := strings.Cut(dirs, ":")
	return filepath.Join(dir, name)
}

// DefaultControlPath is where a client looks for the control socket: in
// $RUNTIME_DIRECTORY when it runs inside the unit (ExecReload=), else at
// DefaultControlSocket.
func DefaultControlPath() string {
	if p := ControlSocketPath(os.Getenv); p != "" {
		return p
	}
	return DefaultControlSocket
}

// DefaultProbePath is where `vipproxy probe` looks for the probe socket.
func DefaultProbePath() string {
	if p := ProbeSocketPath(os.Getenv); p != "" {
		return p
	}
	return DefaultProbeSocket
}

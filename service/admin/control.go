package admin

import (
	"os"
	"path/filepath"
	"strings"
)

// The control socket is a second, private door to the same handler: a unix
// socket in the service's RuntimeDirectory (/run/vipproxy, mode 0700,
// owned by the service's user), which no other program can take.
// `vipproxy probe`, `status` and `reload` ask it first, so that a clash on
// admin.listen's TCP port neither hides the daemon from keepalived (the
// VIP would move for nothing) nor lets another process answer for it.
const (
	ControlSocketName = "control.sock"
	// DefaultControlSocket is where the daemon under the shipped unit
	// (RuntimeDirectory=vipproxy) puts it.
	DefaultControlSocket = "/run/" + "vipproxy/" + ControlSocketName
)

// ControlSocketPath is the control socket's path from systemd's
// $RUNTIME_DIRECTORY (the first entry if there are several); "" without it.
func ControlSocketPath(getenv func(string) string) string {
	dirs := getenv("RUNTIME_DIRECTORY")
	if dirs == "" {
		return ""
	}
	dir, _, _ := strings.Cut(dirs, ":")
	return filepath.Join(dir, ControlSocketName)
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

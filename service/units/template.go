package units

import (
	"os"
	"path/filepath"

	"github.com/vipproxy/vipproxy/service/atomicfile"
	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/systemd"
)

// PortTemplateName is the template unit of the ports after the first.
const PortTemplateName = "vipproxy-port@.socket"

// unitDirs are where systemd looks for system units, first wins
// (systemd.unit(5)); /lib/systemd/system is where Debian's packages put
// theirs.
var unitDirs = []string{"/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system",
	"/usr/lib/systemd/system", "/lib/systemd/system"}

// FindPortTemplate returns where systemd finds vipproxy-port@.socket
// under root, or "" where it finds none.
func FindPortTemplate(root string) string {
	for _, d := range unitDirs {
		p := filepath.Join(rootOr(root), d, PortTemplateName)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// PortTemplate is the template to install under root: the shipped
// vipproxy-port@.socket in /etc/systemd/system, where the config has more
// than one port and systemd finds no template (a tarball install, or the
// README's quick start on a copy of the units without it). Without it
// vipproxy.socket's Wants= of each port's socket names a unit that does
// not exist, and those ports get no listener. ok is false where there is
// nothing to install.
func PortTemplate(cfg *config.Valid, root string) (f atomicfile.File, ok bool) {
	if len(cfg.ServedPorts()) < 2 || FindPortTemplate(root) != "" {
		return atomicfile.File{}, false
	}
	return atomicfile.File{Path: filepath.Join(rootOr(root), unitDirs[0], PortTemplateName), Data: systemd.PortSocketTemplate, Perm: 0o644}, true
}

func rootOr(root string) string {
	if root == "" {
		return "/"
	}
	return root
}

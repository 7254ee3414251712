// Package systemd holds vipproxy's shipped unit files for the commands that
// install one where the package did not: `vipproxy units write` installs
// the vipproxy-port@.socket template when the config has more than one
// port and systemd finds no template.
package systemd

import _ "embed"

// PortSocketTemplate is vipproxy-port@.socket as shipped.
//
//go:embed vipproxy-port@.socket
var PortSocketTemplate []byte

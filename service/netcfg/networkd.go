package netcfg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// Reloader tells systemd-networkd to pick up changed drop-ins. Tests
// inject a counting fake.
type Reloader interface {
	// Running returns nil when systemd-networkd runs, else why not.
	Running(ctx context.Context) error
	// Reload makes networkd re-read its configuration and reconfigure links.
	Reload(ctx context.Context) error
	// Restart restarts networkd, which then reads networkd.conf again.
	Restart(ctx context.Context) error
}

// ErrNetworkdDown says systemd-networkd is not running, so drop-ins have no effect.
var ErrNetworkdDown = errors.New("systemd-networkd is not running")

// Networkctl reloads through the networkctl binary. networkctl reload is
// the same D-Bus call (org.freedesktop.network1.Manager.Reload) and ships
// with networkd itself; calling D-Bus directly would add godbus to the
// binary for one method call.
type Networkctl struct{}

// Running asks systemctl whether systemd-networkd.service is active.
func (Networkctl) Running(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "systemctl", "is-active", "systemd-networkd.service").CombinedOutput()
	state := strings.Join(strings.Fields(string(out)), " ")
	if err == nil && state == "active" {
		return nil
	}
	if state == "" {
		state = fmt.Sprint(err)
	}
	return fmt.Errorf("%w (systemctl is-active systemd-networkd.service: %s): start it with `systemctl enable --now systemd-networkd`, or use --netlink to create the link directly", ErrNetworkdDown, state)
}

// Reload runs `networkctl reload`.
func (Networkctl) Reload(ctx context.Context) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "networkctl", "reload")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("networkctl reload: %w: %s", err, strings.TrimSpace(out.String()))
	}
	return nil
}

// Restart runs `systemctl restart systemd-networkd.service`. A stopping
// networkd leaves links, addresses and routes as they are.
func (Networkctl) Restart(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "systemctl", "restart", "systemd-networkd.service").CombinedOutput()
	if err != nil {
		return fmt.Errorf("systemctl restart systemd-networkd.service: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Package notify speaks the sd_notify protocol to systemd: READY,
// RELOADING (with MONOTONIC_USEC, so Type=notify-reload works), STOPPING,
// STATUS and WATCHDOG. Without NOTIFY_SOCKET every call is a no-op.
package notify

import (
	"context"
	"log/slog"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Notifier sends state changes to the service manager.
type Notifier struct {
	log *slog.Logger
}

// New returns a Notifier that logs send failures to log.
func New(log *slog.Logger) *Notifier { return &Notifier{log: log} }

func (n *Notifier) send(state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		n.log.Warn("sd_notify failed", "state", state, "err", err)
	}
}

// Ready says the service is up, with a status line.
func (n *Notifier) Ready(status string) { n.send(daemon.SdNotifyReady + "\nSTATUS=" + status) }

// Reloading says a reload started; Ready must follow when it is done.
func (n *Notifier) Reloading() {
	n.send(daemon.SdNotifyReloading + "\n" + daemon.SdNotifyMonotonicUsec())
}

// Stopping says the service is shutting down.
func (n *Notifier) Stopping(status string) { n.send(daemon.SdNotifyStopping + "\nSTATUS=" + status) }

// Status updates the one-line status shown by systemctl status.
func (n *Notifier) Status(status string) { n.send("STATUS=" + status) }

// Watchdog pings the watchdog at half of WATCHDOG_USEC until ctx is done,
// but only while alive() holds: a hung accept loop or health checker then
// makes systemd restart the service. It returns at once when no watchdog
// is configured.
func (n *Notifier) Watchdog(ctx context.Context, alive func() bool) {
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		return
	}
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if alive() {
				n.send(daemon.SdNotifyWatchdog)
			} else {
				n.log.Error("watchdog ping withheld: accept loop or health checker is not alive")
			}
		}
	}
}

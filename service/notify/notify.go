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

// pingsPerPeriod is how many pings Watchdog sends per WATCHDOG_USEC: three
// in a row may come late or not at all before systemd acts. A busy node
// delays a goroutine's timer, it does not stop it (measured on 2026-12-06
// on 2 cores with four busy loops, load 16-20: pings every 500 ms arrived
// at most 691 ms apart).
const pingsPerPeriod = 4

// Watchdog pings the watchdog pingsPerPeriod times per WATCHDOG_USEC until
// ctx is done, from a goroutine of its own that waits only on its ticker,
// but only while alive() holds: a hung accept loop or health checker then
// makes systemd restart the service. A ping that comes more than two
// periods after the last one is logged (a starved node: how close the
// watchdog came). It returns at once when no watchdog is configured.
func (n *Notifier) Watchdog(ctx context.Context, alive func() bool) {
	limit, err := daemon.SdWatchdogEnabled(false)
	if err != nil || limit <= 0 {
		return
	}
	period := limit / pingsPerPeriod
	t := time.NewTicker(period)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !alive() {
				n.log.Error("watchdog ping withheld: accept loop or health checker is not alive")
				continue
			}
			now := time.Now()
			if gap := now.Sub(last); gap > 2*period {
				n.log.Warn("watchdog ping late: the node is starved", "since_last_ping", gap.Round(time.Millisecond), "watchdog", limit)
			}
			n.send(daemon.SdNotifyWatchdog)
			last = now
		}
	}
}

package notify

import (
	"context"
	"fmt"
	"os"

	"github.com/coreos/go-systemd/v22/dbus"
)

// StopJob asks systemd which job is stopping the unit of process pid:
// "restart" for `systemctl restart` (and a restart its socket unit or a
// dependency passes on), "stop" for `systemctl stop`, a stop of the
// socket unit or shutdown, "" when there is none (a SIGTERM sent by hand,
// after which the unit stops too). The answer decides whether systemd's
// file descriptor store survives: it keeps it across a restart and
// empties it when the unit stops.
//
// As root (ExecStop=+, vipproxy.service) it asks systemd on its private
// socket, which needs no dbus-daemon: that one refuses the question to a
// DynamicUser= service (measured on Debian 12, systemd 252, 2026-12-06)
// and may be stopped already at shutdown. Otherwise it asks on the system
// bus.
func StopJob(ctx context.Context, pid int) (unit, jobType string, err error) {
	conn, err := connectSystemd(ctx)
	if err != nil {
		return "", "", err
	}
	defer conn.Close()
	unit, err = conn.GetUnitNameByPID(ctx, uint32(pid))
	if err != nil {
		return "", "", fmt.Errorf("ask systemd for the unit of pid %d: %w", pid, err)
	}
	jobs, err := conn.ListJobsContext(ctx)
	if err != nil {
		return unit, "", fmt.Errorf("ask systemd for the jobs of %s: %w", unit, err)
	}
	for _, j := range jobs {
		if j.Unit == unit {
			return unit, j.JobType, nil
		}
	}
	return unit, "", nil
}

// connectSystemd connects to systemd: its private socket as root, the
// system bus otherwise (or when the private socket fails).
func connectSystemd(ctx context.Context) (*dbus.Conn, error) {
	if os.Geteuid() == 0 {
		conn, err := dbus.NewSystemdConnectionContext(ctx)
		if err == nil {
			return conn, nil
		}
	}
	conn, err := dbus.NewSystemConnectionContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect to systemd: %w", err)
	}
	return conn, nil
}

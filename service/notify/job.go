package notify

import (
	"context"
	"fmt"
	"os"

	"github.com/coreos/go-systemd/v22/dbus"
)

// StopJob asks systemd, over the system bus, which job is stopping this
// process's unit: "restart" for `systemctl restart` (and a restart its
// socket unit or a dependency passes on), "stop" for `systemctl stop`,
// "" when there is none (a SIGTERM sent by hand, after which the unit
// stops too). The answer decides whether the file descriptor store
// survives: systemd keeps it across a restart and empties it when the
// unit stops. Reading units and jobs needs no privilege.
func StopJob(ctx context.Context) (unit, jobType string, err error) {
	conn, err := dbus.NewSystemConnectionContext(ctx)
	if err != nil {
		return "", "", fmt.Errorf("connect to the system bus: %w", err)
	}
	defer conn.Close()
	unit, err = conn.GetUnitNameByPID(ctx, uint32(os.Getpid()))
	if err != nil {
		return "", "", fmt.Errorf("ask systemd for our unit: %w", err)
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

package announce

import (
	"context"
	"log/slog"
	"net/netip"
	"time"
)

// Timing of the readiness checks. A dead or unready proxy is withdrawn
// after Fall failed checks in a row, so within Fall x Interval plus one
// check's timeout (a killed daemon refuses at once: 1 s); one passed check
// announces again, the daemon's readiness having its own rise already.
// Two failures rather than one: a single slow answer from a busy node must
// not withdraw it (each withdrawal moves flows on the routers' ECMP).
const (
	Interval     = 500 * time.Millisecond
	Fall         = 2
	CheckTimeout = time.Second
)

// Announcer holds the announce link while Ready passes.
type Announcer struct {
	Interface string
	VIPs      []netip.Addr
	// Ready asks whether the local proxy is ready (the keepalived probe's
	// question): nil when it is, else why not.
	Ready func(ctx context.Context) error
	// Changed is told each time the announcement starts or stops, with why.
	Changed func(announced bool, why string)
	Log     *slog.Logger

	// openErr is the last failure to open the link, said once (it is
	// tried again at every check: the journal must not get two a second).
	openErr string
}

// Run checks readiness every Interval until ctx ends, opening the link when
// ready and closing it after Fall failures in a row or a failure to open;
// it closes the link before it returns.
func (a *Announcer) Run(ctx context.Context) {
	var link *Link
	defer func() {
		if link != nil {
			a.withdraw(link, "stopping")
		}
	}()
	failed := 0
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, CheckTimeout)
		err := a.Ready(cctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		link, failed = a.step(link, failed, err)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// step applies one check result: the link to hold after it, and the
// failures in a row.
func (a *Announcer) step(link *Link, failed int, readyErr error) (*Link, int) {
	switch {
	case readyErr != nil:
		failed++
		if link != nil && failed >= Fall {
			a.withdraw(link, "not ready: "+readyErr.Error())
			return nil, failed
		}
		return link, failed
	case link != nil:
		return a.recheck(link), 0
	}
	return a.open(), 0
}

// recheck keeps link when it is still as Open made it; when it changed
// under vipproxy (deleted, set down, an address removed) the VIP is
// withdrawn and the link made again at once.
func (a *Announcer) recheck(link *Link) *Link {
	why, err := link.Changed(a.VIPs)
	if err != nil {
		a.Log.Warn("cannot check the announce link; keeping it", "interface", a.Interface, "err", err)
		return link
	}
	if why == "" {
		return link
	}
	a.withdraw(link, "the announce link changed: "+why)
	return a.open()
}

// open opens the announce link: nil when that fails (said once per cause).
func (a *Announcer) open() *Link {
	l, err := Open(a.Interface, a.VIPs)
	if err != nil {
		if err.Error() != a.openErr {
			a.openErr = err.Error()
			a.Log.Error("cannot announce the VIP: the announce link failed; trying again at every check", "interface", a.Interface, "err", err)
			a.Changed(false, "the announce link failed: "+err.Error())
		}
		return nil
	}
	a.openErr = ""
	a.Log.Info("announcing the VIP: the proxy is ready", "interface", a.Interface, "vips", a.VIPs)
	a.Changed(true, "ready")
	return l
}

func (a *Announcer) withdraw(link *Link, why string) {
	if err := link.Close(); err != nil {
		a.Log.Error("closing the announce link", "err", err)
	}
	a.Log.Warn("VIP withdrawn", "interface", a.Interface, "reason", why)
	a.Changed(false, why)
}

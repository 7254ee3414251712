package balance

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
)

// State is a backend's availability as the picker sees it. It is the one
// truth about whether a backend may be picked: the health checker and the
// proxy only report events (Event), and the pool alone moves the state.
type State uint8

// The states of a backend.
const (
	// Unknown: added by a reload or discovery, no health verdict yet.
	// Picked only when no backend is known to be good, so a reload to many
	// new backends does not send clients to ones that were never checked.
	Unknown State = iota
	// Starting: one of the backends the pool was built with (the daemon's
	// start), no health verdict yet. Picked with the Up ones, as HAProxy
	// starts its servers up: at a daemon's start, the first backend whose
	// check passed would otherwise take every connection of the reconnect
	// storm that a restart is (measured, 300 watches through a
	// socket-activated restart: 32/32/236 over three backends). Its first
	// check decides, as Unknown's does; a failed dial makes it Unknown, to
	// wait for that check as added backends do.
	Starting
	// Up: its checks pass.
	Up
	// Suspect: its checks pass, but a connection to it failed since the
	// last good check. Picked after the Up ones.
	Suspect
	// Down: its checks fail (the first one, or `fall` in a row).
	Down
	// Recovering: Down, but its latest check passed (not yet `rise` in a
	// row). A last resort when nothing better is left.
	Recovering
	numStates
)

func (s State) String() string {
	switch s {
	case Unknown:
		return "unknown"
	case Starting:
		return "starting"
	case Up:
		return "up"
	case Suspect:
		return "suspect"
	case Down:
		return "down"
	case Recovering:
		return "recovering"
	}
	return "invalid"
}

// MarshalText writes the name (JSON /status, logs).
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a name MarshalText wrote (a /status read by the CLI).
func (s *State) UnmarshalText(text []byte) error {
	for _, st := range States() {
		if st.String() == string(text) {
			*s = st
			return nil
		}
	}
	return fmt.Errorf("unknown backend state %q", text)
}

// States lists every state, in order (for metrics labels).
func States() []State {
	all := make([]State, numStates)
	for i := range all {
		all[i] = State(i)
	}
	return all
}

// Healthy says the backend's checks pass (Up or Suspect).
func (s State) Healthy() bool { return s == Up || s == Suspect }

// Unchecked says no health check result has reached the backend yet
// (Unknown or Starting).
func (s State) Unchecked() bool { return s == Unknown || s == Starting }

// TakesConnections is readiness for one backend in state s and rotation
// r: its checks pass and it is in rotation (not drained by the operator,
// not removed by a reload). /readyz counts these, and the evacuation of a
// down backend waits for one.
func (s State) TakesConnections(r Rotation) bool { return s.Healthy() && r == InRotation }

// pickedAs is the state whose tier Pick takes a backend in s from: a
// Starting backend is taken with the Up ones, every other in its own.
func (s State) pickedAs() State {
	if s == Starting {
		return Up
	}
	return s
}

// Event is something that happened to a backend.
type Event uint8

// The events. Reporters send CheckPassed and CheckFailed for each health
// check result (a check that failed for a local reason is no event at
// all), DialFailed and Loops from the proxy. The pool counts the check
// results in a row and turns the one that completes `rise` passes into
// CheckRise and the one that completes `fall` failures into CheckFall, so
// that this table, with the counting, is the whole machine.
const (
	// CheckPassed is one passed check, fewer than `rise` in a row.
	CheckPassed Event = iota
	// CheckRise is a passed check that makes `rise` (or more) in a row.
	CheckRise
	// CheckFailed is one failed check, fewer than `fall` in a row.
	CheckFailed
	// CheckFall is a failed check that makes `fall` (or more) in a row.
	CheckFall
	// DialFailed: the proxy could not connect, or the backend closed a
	// connection before answering it.
	DialFailed
	// Loops: a connection to it reached vipproxy's own listener (its name
	// came to resolve to the VIP): down at once, whatever it was, so the
	// proxy does not connect to itself until the descriptors run out. It
	// clears the count of checks in a row: only `rise` passes after it
	// bring the backend back.
	Loops
	numEvents
)

func (e Event) String() string {
	switch e {
	case CheckPassed:
		return "check-passed"
	case CheckRise:
		return "check-rise"
	case CheckFailed:
		return "check-failed"
	case CheckFall:
		return "check-fall"
	case DialFailed:
		return "dial-failed"
	case Loops:
		return "loops"
	}
	return "invalid"
}

// check reports whether e is a health check result, and whether it passed.
func (e Event) check() (isCheck, passed bool) {
	switch e {
	case CheckPassed, CheckRise:
		return true, true
	case CheckFailed, CheckFall:
		return true, false
	}
	return false, false
}

// transitions is the whole state machine: the next state for every state
// and event. Read a row as "in this state, on each event, go to". The
// first check result decides at once (the Unknown and Starting rows), so
// that the daemon can report READY after one round of checks. What a
// state means for picking is Pick's tiers (pool.go); what a move to Down
// does to open connections is evacuation (evacuate.go).
var transitions = [numStates][numEvents]State{
	//           CheckPassed CheckRise CheckFailed CheckFall DialFailed Loops
	Unknown:    {Up, Up, Down, Down, Unknown, Down},
	Starting:   {Up, Up, Down, Down, Unknown, Down},
	Up:         {Up, Up, Up, Down, Suspect, Down},
	Suspect:    {Up, Up, Suspect, Down, Suspect, Down},
	Down:       {Recovering, Up, Down, Down, Down, Down},
	Recovering: {Recovering, Up, Down, Down, Down, Down},
}

// next is the state after e in s.
func next(s State, e Event) State {
	if s >= numStates || e >= numEvents {
		return s
	}
	return transitions[s][e]
}

// Thresholds are the checks in a row that move a backend: `rise` passes
// bring a down one up, `fall` failures take an up one down. Each pool has
// its own (a port may override [health]).
type Thresholds struct {
	Rise, Fall int
}

// streak counts the check results in a row that agree.
type streak struct {
	n      int
	passed bool
}

// count adds one result (isCheck, passed from Event.check), or clears the
// count on Loops, and returns the event the result earns under th.
func (s *streak) count(e Event, th Thresholds) Event {
	isCheck, passed := e.check()
	if !isCheck {
		if e == Loops {
			*s = streak{}
		}
		return e
	}
	if s.n > 0 && s.passed == passed {
		s.n++
	} else {
		*s = streak{n: 1, passed: passed}
	}
	switch {
	case passed && s.n >= max(th.Rise, 1):
		return CheckRise
	case passed:
		return CheckPassed
	case s.n >= max(th.Fall, 1):
		return CheckFall
	default:
		return CheckFailed
	}
}

// Rotation is whether the operator or a reload keeps a backend out of
// rotation. It is apart from State: a draining backend keeps being
// checked, and is picked again in its current state when undrained.
type Rotation uint8

// The rotations of a backend.
const (
	InRotation Rotation = iota
	Draining            // taken out by the operator; open connections stay
	Removed             // dropped by a reload; final
)

func (r Rotation) String() string {
	switch r {
	case InRotation:
		return "in-rotation"
	case Draining:
		return "draining"
	case Removed:
		return "removed"
	}
	return "invalid"
}

// nextRotation: draining toggles; removal is final.
func nextRotation(r Rotation, drain, remove bool) Rotation {
	switch {
	case r == Removed || remove:
		return Removed
	case drain:
		return Draining
	default:
		return InRotation
	}
}

// LocalFault reports whether err is this host's shortage rather than a
// verdict about the remote end: out of descriptors (EMFILE, ENFILE), of
// kernel buffers or memory (ENOBUFS, ENOMEM), of local ports
// (EADDRNOTAVAIL), or an attempt we cancelled ourselves. Such a failure
// must not move a backend's state: a client flood that exhausts our
// descriptors would otherwise mark every backend down at once.
//
// A failed name lookup is checked once more: Go's resolver, out of
// descriptors, cannot read /etc/hosts or reach a DNS server and says "no
// such host", the same words as a real NXDOMAIN. Whether this process can
// open a descriptor right now tells the two apart.
func LocalFault(err error) bool {
	if err == nil {
		return false
	}
	for _, local := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.EADDRNOTAVAIL, context.Canceled} {
		if errors.Is(err, local) {
			return true
		}
	}
	var dns *net.DNSError
	return errors.As(err, &dns) && outOfDescriptors()
}

// outOfDescriptors reports whether the process cannot open a descriptor
// now (it tries to duplicate stderr and closes the copy).
func outOfDescriptors() bool {
	fd, err := syscall.Dup(2)
	if err == nil {
		syscall.Close(fd)
		return false
	}
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

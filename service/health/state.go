// Package health runs the active health checks of the backends: one
// goroutine per backend probes it on a ticker and feeds the result to a
// small rise/fall state machine. It knows nothing about the proxy; the
// daemon reads the states (Snapshot, events) and acts on them.
package health

// State is what the checker believes about one backend.
type State int

// The states of a backend. Unknown lasts only until the first result.
const (
	Unknown State = iota
	Up
	Down
)

func (s State) String() string {
	switch s {
	case Unknown:
		return "unknown"
	case Up:
		return "up"
	case Down:
		return "down"
	}
	return "invalid"
}

// Machine is the rise/fall state machine of one backend. The transitions,
// all of them:
//
//	Unknown --first success-------------------> Up
//	Unknown --first failure-------------------> Down
//	Up      --Fall consecutive failures--------> Down
//	Down    --Rise consecutive successes-------> Up
//
// The first result decides at once so that the daemon can report READY
// after one round of checks. Any other result keeps the state and only
// counts towards the streak. A Machine is not safe for concurrent use.
type Machine struct {
	// Rise and Fall are the thresholds; values below 1 count as 1.
	Rise, Fall int

	state State
	// streak counts consecutive results equal to the latest one.
	streak int
	last   bool
}

// NewMachine returns a machine in state Unknown.
func NewMachine(rise, fall int) *Machine {
	return &Machine{Rise: rise, Fall: fall}
}

// State returns the current state.
func (m *Machine) State() State { return m.state }

// Streak returns how many consecutive results equal the latest one.
func (m *Machine) Streak() int { return m.streak }

// Observe feeds one check result and reports whether the state changed.
func (m *Machine) Observe(ok bool) (changed bool) {
	if m.streak > 0 && ok == m.last {
		m.streak++
	} else {
		m.streak, m.last = 1, ok
	}
	next := m.state
	switch {
	case m.state == Unknown && ok:
		next = Up
	case m.state == Unknown && !ok:
		next = Down
	case m.state == Up && !ok && m.streak >= atLeastOne(m.Fall):
		next = Down
	case m.state == Down && ok && m.streak >= atLeastOne(m.Rise):
		next = Up
	}
	changed = next != m.state
	m.state = next
	return changed
}

func atLeastOne(n int) int { return max(n, 1) }

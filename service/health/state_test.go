package health

import "testing"

// feed observes results in order and returns the state after each one
// and whether that result changed it.
func feed(m *Machine, results ...bool) (states []State, changes []bool) {
	for _, ok := range results {
		changes = append(changes, m.Observe(ok))
		states = append(states, m.State())
	}
	return states, changes
}

func TestMachineTransitions(t *testing.T) {
	const T, F = true, false
	tests := []struct {
		name       string
		rise, fall int
		results    []bool
		states     []State
		changes    []bool
	}{
		{"unknown to up on first success", 2, 3, []bool{T}, []State{Up}, []bool{T}},
		{"unknown to down on first failure", 2, 3, []bool{F}, []State{Down}, []bool{T}},
		{"up stays up until fall failures", 2, 3,
			[]bool{T, F, F, F},
			[]State{Up, Up, Up, Down},
			[]bool{T, F, F, T}},
		{"a success resets the failure streak", 2, 2,
			[]bool{T, F, T, F, F},
			[]State{Up, Up, Up, Up, Down},
			[]bool{T, F, F, F, T}},
		{"down stays down until rise successes", 3, 2,
			[]bool{F, T, T, T},
			[]State{Down, Down, Down, Up},
			[]bool{T, F, F, T}},
		{"a failure resets the success streak", 2, 2,
			[]bool{F, T, F, T, T},
			[]State{Down, Down, Down, Down, Up},
			[]bool{T, F, F, F, T}},
		{"rise and fall of 1 flip at once", 1, 1,
			[]bool{T, F, T, F},
			[]State{Up, Down, Up, Down},
			[]bool{T, T, T, T}},
		{"thresholds below 1 count as 1", 0, -5,
			[]bool{T, F, T},
			[]State{Up, Down, Up},
			[]bool{T, T, T}},
		{"repeated successes keep up without change", 2, 2,
			[]bool{T, T, T},
			[]State{Up, Up, Up},
			[]bool{T, F, F}},
		{"full cycle up down up", 2, 2,
			[]bool{T, F, F, T, T, F, F},
			[]State{Up, Up, Down, Down, Up, Up, Down},
			[]bool{T, F, T, F, T, F, T}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMachine(tc.rise, tc.fall)
			if m.State() != Unknown {
				t.Fatalf("new machine is %v, want unknown", m.State())
			}
			states, changes := feed(m, tc.results...)
			for i := range tc.results {
				if states[i] != tc.states[i] || changes[i] != tc.changes[i] {
					t.Fatalf("after result %d (%v): state %v changed %v, want %v changed %v",
						i, tc.results[i], states[i], changes[i], tc.states[i], tc.changes[i])
				}
			}
		})
	}
}

func TestMachineStreak(t *testing.T) {
	m := NewMachine(2, 2)
	feed(m, true, true, true)
	if m.Streak() != 3 {
		t.Fatalf("streak %d after 3 successes, want 3", m.Streak())
	}
	feed(m, false)
	if m.Streak() != 1 {
		t.Fatalf("streak %d after a failure, want 1", m.Streak())
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{Unknown: "unknown", Up: "up", Down: "down", State(9): "invalid"} {
		if s.String() != want {
			t.Errorf("State(%d).String() = %q, want %q", int(s), s.String(), want)
		}
	}
}

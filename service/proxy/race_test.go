//go:build race

package proxy

// raceOn: the race detector instruments allocations (see
// TestConnectionSetupAllocatesLittle), so allocation figures mean nothing.
const raceOn = true

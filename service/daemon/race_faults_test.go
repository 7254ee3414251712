//go:build race

package daemon_test

// raceOn keeps the fault suite light under the race detector: the test
// process is instrumented (the daemon binary it runs is not), which makes
// the load generators several times slower and caps live goroutines.
const raceOn = true

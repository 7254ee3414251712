//go:build !race

package daemon_test

// raceOn is false: see race_faults_test.go.
const raceOn = false

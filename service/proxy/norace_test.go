//go:build !race

package proxy

// raceOn is false: see race_test.go.
const raceOn = false

package config

import (
	"fmt"
	"strings"
)

// The enumerated keys. Each is a type whose names are listed once, here;
// decoding refuses any other name, so no other package checks them again.
// A new algorithm or check kind is a name here plus its implementation
// (balance/policy.go, health/probe.go), whose tests fail until both exist.

// Algorithm is balance.algorithm: how the pool picks a backend.
type Algorithm string

// Balancing algorithms.
const (
	RoundRobin       Algorithm = "round-robin"
	LeastConnections Algorithm = "least-connections"
	RandomTwoChoices Algorithm = "random-two-choices"
)

// Algorithms lists every algorithm, the default first.
var Algorithms = []Algorithm{RoundRobin, LeastConnections, RandomTwoChoices}

// CheckKind is health.type: what a health check does.
type CheckKind string

// Health check kinds.
const (
	CheckTCP   CheckKind = "tcp"
	CheckTLS   CheckKind = "tls"
	CheckHTTPS CheckKind = "https"
)

// CheckKinds lists every check kind.
var CheckKinds = []CheckKind{CheckTCP, CheckTLS, CheckHTTPS}

func (a Algorithm) String() string { return string(a) }

// UnmarshalText accepts only the names in Algorithms.
func (a *Algorithm) UnmarshalText(text []byte) error { return oneOf(a, Algorithms, string(text)) }

// MarshalText writes the name.
func (a Algorithm) MarshalText() ([]byte, error) { return []byte(a), nil }

func (k CheckKind) String() string { return string(k) }

// UnmarshalText accepts only the names in CheckKinds.
func (k *CheckKind) UnmarshalText(text []byte) error { return oneOf(k, CheckKinds, string(text)) }

// MarshalText writes the name.
func (k CheckKind) MarshalText() ([]byte, error) { return []byte(k), nil }

// choiceError is a name that is not one of the choices; decodeText reports
// it as it is.
type choiceError struct{ msg string }

func (e *choiceError) Error() string { return e.msg }

func oneOf[T ~string](dst *T, choices []T, s string) error {
	names := make([]string, len(choices))
	for i, c := range choices {
		if string(c) == s {
			*dst = c
			return nil
		}
		names[i] = string(c)
	}
	return &choiceError{fmt.Sprintf("%q is not one of %s", s, strings.Join(names, ", "))}
}

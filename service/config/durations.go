package config

import (
	"math"
	"time"
)

// durationRange is what one duration key may be.
type durationRange struct {
	min, max time.Duration
	// why names the limit behind max when it is the kernel's, not ours.
	why string
}

// positive is the min of a duration that must be above zero.
const positive = time.Nanosecond

// Limits of durations.
const (
	minInterval = 100 * time.Millisecond
	minResync   = time.Second
	// maxDuration bounds every duration that is not a kernel setting: the
	// daemon adds and multiplies them (a health wait is
	// 3*interval+timeout), and a longer wait is a typo, not a setting. The
	// two kernel settings take the kernel's limits (below).
	maxDuration = 24 * time.Hour
	// maxKeepAlive is the kernel's limit for TCP_KEEPIDLE and TCP_KEEPINTVL
	// (MAX_TCP_KEEPIDLE, 32767 s); the proxy sets both to timeouts.keepalive.
	maxKeepAlive = 32767 * time.Second
	// maxUserTimeout is the largest TCP_USER_TIMEOUT the kernel takes: an int
	// of milliseconds. "597h" overflowed it and every connection failed
	// with EINVAL while /readyz stayed 200.
	maxUserTimeout = math.MaxInt32 * time.Millisecond
)

// durationRanges is the range of every duration key, in one table; a
// [port.health] key has its [health] key's range. TestEveryDurationHasARange
// finds a new duration key missing here.
var durationRanges = map[string]durationRange{
	"health.interval":           {min: minInterval, max: maxDuration},
	"health.timeout":            {min: positive, max: maxDuration},
	"timeouts.dial":             {min: positive, max: maxDuration},
	"timeouts.keepalive":        {max: maxKeepAlive, why: " (the kernel's TCP_KEEPIDLE limit)"},
	"timeouts.user_timeout":     {max: maxUserTimeout, why: " (TCP_USER_TIMEOUT is a 32-bit count of milliseconds)"},
	"timeouts.drain":            {max: maxDuration},
	"timeouts.drain_idle":       {max: maxDuration},
	"limits.accept_backoff_max": {min: positive, max: maxDuration},
	"discovery.resync":          {min: minResync, max: maxDuration},
	"discovery.grace":           {max: maxDuration},
}

// duration checks d, written at key (port[1].health.interval), against
// the range of rule (health.interval).
func (v *validator) duration(key, rule string, d Duration) {
	r := durationRanges[rule]
	switch {
	case d.Duration < r.min && r.min == 0:
		v.bad(key, "%s is negative", d)
	case d.Duration < r.min && r.min == positive:
		v.bad(key, "must be positive")
	case d.Duration < r.min:
		v.bad(key, "%s is shorter than the minimum %s", d, Duration{r.min})
	case d.Duration > r.max:
		v.bad(key, "%s is longer than the maximum %s%s", d, Duration{r.max}, r.why)
	}
}

// durations checks every duration outside the health tables (those are
// checked per table, see checkHealth).
func (v *validator) durations() {
	c := v.c
	for key, d := range map[string]Duration{
		"timeouts.dial":             c.Timeouts.Dial,
		"timeouts.keepalive":        c.Timeouts.KeepAlive,
		"timeouts.user_timeout":     c.Timeouts.UserTimeout,
		"timeouts.drain":            c.Timeouts.Drain,
		"timeouts.drain_idle":       c.Timeouts.DrainIdle,
		"limits.accept_backoff_max": c.Limits.AcceptBackoffMax,
		"discovery.resync":          c.Discovery.Resync,
		"discovery.grace":           c.Discovery.Grace,
	} {
		v.duration(key, key, d)
	}
}

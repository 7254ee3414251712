package testutil

import (
	"testing"
	"time"
)

func TestSlowdown(t *testing.T) {
	for _, c := range []struct {
		qemu, slowdown string
		want           time.Duration
	}{
		{"", "", 1},
		{"qemu-aarch64-static", "", emulationSlowdown},
		{"", "20", 20},
		{"qemu-aarch64-static", "3", 3}, // the explicit factor wins
	} {
		t.Setenv("VIPPROXY_QEMU_USER", c.qemu)
		t.Setenv(slowdownEnv, c.slowdown)
		if got := Slowdown(); got != c.want {
			t.Errorf("qemu %q, %s=%q: Slowdown() = %d, want %d", c.qemu, slowdownEnv, c.slowdown, got, c.want)
		}
		if got, want := CheckPeriod(200*time.Millisecond), (200 * time.Millisecond * c.want).String(); got != want {
			t.Errorf("qemu %q, %s=%q: CheckPeriod(200ms) = %s, want %s", c.qemu, slowdownEnv, c.slowdown, got, want)
		}
	}
}

func TestSlowdownRefusesATypo(t *testing.T) {
	for _, bad := range []string{"x", "0", "-2", "1.5", "101"} {
		t.Setenv(slowdownEnv, bad)
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s=%q accepted", slowdownEnv, bad)
				}
			}()
			Slowdown()
		}()
	}
}

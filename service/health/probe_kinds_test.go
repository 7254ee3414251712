package health

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/service/config"
)

// TestEveryCheckKindHasAProber: config.CheckKinds (what check accepts) and
// probers (what the checker runs) name the same kinds.
func TestEveryCheckKindHasAProber(t *testing.T) {
	testutil.EveryNameImplemented(t, config.CheckKinds, probers, "prober")
}

// TestCheckOfOurOwnListenerFails: a backend that reaches one of our own
// listeners, by IP or by a name resolving to it, fails its check with
// that reason (it would otherwise pass, checking ourselves).
func TestCheckOfOurOwnListenerFails(t *testing.T) {
	ln := listen(t, "127.0.0.1:0")
	own := ln.Addr().(*net.TCPAddr).AddrPort()
	p, err := NewProber(healthConfig(config.CheckTCP), own)
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{own.String(), fmt.Sprintf("localhost:%d", own.Port())} {
		if err := p.Probe(context.Background(), addr); err == nil || !strings.Contains(err.Error(), "own listener") {
			t.Errorf("check of %s = %v, want a failure naming our own listener", addr, err)
		}
	}
	plain, _ := NewProber(healthConfig(config.CheckTCP))
	if err := plain.Probe(context.Background(), own.String()); err != nil {
		t.Errorf("without own addresses the same check passes, got %v", err)
	}
}

package announce

import (
	"bytes"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
)

// A link that cannot be opened (here a name the kernel refuses, or no
// /dev/net/tun for this user) is tried again at every check, but said
// once in the log and STATUS=, not twice a second.
func TestOpenFailureSaidOnce(t *testing.T) {
	var logs bytes.Buffer
	var changes []string
	a := &Announcer{
		Interface: "bad/name", VIPs: []netip.Addr{netip.MustParseAddr("192.0.2.10")},
		Log:     slog.New(slog.NewTextHandler(&logs, nil)),
		Changed: func(on bool, why string) { changes = append(changes, why) },
	}
	for range 5 {
		if link, _ := a.step(nil, 0, nil); link != nil {
			link.Close()
			t.Fatal("a link named bad/name was opened")
		}
	}
	if n := strings.Count(logs.String(), "cannot announce the VIP"); n != 1 || len(changes) != 1 {
		t.Errorf("5 failed opens logged %d times and told %d times (%v); want once each:\n%s", n, len(changes), changes, logs.String())
	}
}

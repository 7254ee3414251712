package config

import (
	"log/slog"
	"strings"
	"testing"
)

// log.level's names are log/slog's: each maps to the level slog reads
// from the same name.
func TestLogLevelsAreSlogLevels(t *testing.T) {
	for _, l := range LogLevels {
		var want slog.Level
		if err := want.UnmarshalText([]byte(l)); err != nil {
			t.Fatalf("%s is no slog level: %v", l, err)
		}
		if got := l.Slog(); got != want {
			t.Errorf("%s: %v, want %v", l, got, want)
		}
	}
}

// log.level and keepalived.state are decoded as enums: a known name is
// taken, any other refused with the choices, at its line.
func TestLogLevelAndVRRPStateDecode(t *testing.T) {
	base := "[vip]\naddresses = [\"10.0.0.10\"]\n[[backend]]\naddress = \"10.0.0.1:6443\"\n[network]\nuplinks = [\"eth0\"]\n"
	cfg, err := Parse("t.toml", []byte(base+"[log]\nlevel = \"debug\"\n[keepalived]\nstate = \"MASTER\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Log.Level != LogDebug || cfg.Keepalived.State != VRRPMaster {
		t.Errorf("decoded %q %q", cfg.Log.Level, cfg.Keepalived.State)
	}
	for text, want := range map[string]string{
		"[log]\nlevel = \"WARN\"\n":          `t.toml:8: log.level: "WARN" is not one of debug, info, warn, error`,
		"[keepalived]\nstate = \"backup\"\n": `t.toml:8: keepalived.state: "backup" is not one of BACKUP, MASTER`,
	} {
		if _, err := Parse("t.toml", []byte(base+text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %s", text, err, want)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/service/config"
)

// buildBinaries compiles the real vipproxy and vipproxy-apiserver.
func buildBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/", "../vipproxy", "../vipproxy-apiserver")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// TestDemoEndToEnd runs the whole demo with the real binaries: balancing,
// zero failed requests across a SIGKILL, health down and back up.
func TestDemoEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes for several seconds")
	}
	bin := buildBinaries(t)
	probe, _ := exec.Command(filepath.Join(bin, "vipproxy"), "serve", "--config", "/nonexistent").CombinedOutput()
	if strings.Contains(string(probe), "not implemented") {
		t.Skip("vipproxy serve is not implemented yet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	res, err := runDemo(ctx, demoOptions{BinDir: bin, Out: &out, Requests: 30})
	t.Logf("demo output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range backendNames {
		if n := res.Balanced.Counts[name]; n < 8 || n > 12 {
			t.Errorf("balanced round: %s answered %d of 30; want 10 ± 2", name, n)
		}
	}
	for _, p := range []phase{res.Balanced, res.Killed, res.Down, res.Restarted} {
		if p.Failed != 0 || sum(p.Counts) != 30 {
			t.Errorf("a round had %d failed requests (answers %v); want 0 failed of 30", p.Failed, p.Counts)
		}
	}
	if res.Killed.Counts["cp2"] != 0 || res.Down.Counts["cp2"] != 0 || res.Down.States["cp2"] != "down" {
		t.Errorf("after SIGKILL cp2 answered %d then %d and is %q; want 0, 0 and down", res.Killed.Counts["cp2"], res.Down.Counts["cp2"], res.Down.States["cp2"])
	}
	if res.Restarted.Counts["cp2"] == 0 {
		t.Errorf("after restart cp2 answered nothing: %v", res.Restarted.Counts)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func TestCollectStates(t *testing.T) {
	got, reasons := map[string]string{}, map[string]string{}
	collectStates(map[string]any{
		"backends": []any{
			map[string]any{"name": "cp1", "state": "UP", "open": 2.0},
			map[string]any{"name": "cp2", "healthy": false, "last_error": "connection refused"},
		},
	}, got, reasons)
	if got["cp1"] != "up" || got["cp2"] != "down" || len(got) != 2 || reasons["cp2"] != "connection refused" {
		t.Fatalf("collectStates = %v, reasons %v", got, reasons)
	}
}

// TestConfigIsValid: the config the demo writes passes the strict loader.
func TestConfigIsValid(t *testing.T) {
	d := &demo{dir: t.TempDir(), ports: map[string]int{}}
	if err := d.setup(); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(d.configPath(), config.AllFiles)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Health.Type != config.CheckHTTPS || cfg.Health.CertFile != d.pki.ClientCert || len(cfg.Backends) != 3 {
		t.Errorf("demo config: %+v", cfg)
	}
}

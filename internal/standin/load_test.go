package standin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestLoadCountsCutsAndFailures holds watches and opens new connections
// to a stand-in: a window while it serves has every watch streaming, no
// cut and no failure; after the stand-in closes, the next window counts
// every watch cut and the new connections failed.
func TestLoadCountsCutsAndFailures(t *testing.T) {
	srv, files := start(t, Options{Name: "a", WatchInterval: 20 * time.Millisecond})
	clientTLS, err := files.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	status, report := filepath.Join(dir, "status.json"), filepath.Join(dir, "report.json")
	spec := LoadSpec{Target: srv.Addr(), TLS: clientTLS, Watches: 5, ConnectEvery: 20 * time.Millisecond, Timeout: 30 * time.Second, Ramp: 2}
	ctx, cancel := context.WithCancel(context.Background())
	next := make(chan os.Signal)
	done := make(chan error, 1)
	go func() { done <- RunLoad(ctx, spec, next, status, report) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	waitFor(t, status, "every watch streaming and 5 connections answered", func(r LoadReport) bool {
		return r.Up == 5 && r.OldestEvent > 0 && r.Connections >= 5
	})
	steady := closeWindow(t, next, report, 0)
	if steady.Cut != 0 || steady.Failed != 0 || steady.Corrupt != 0 || steady.Events < 5 || steady.Watches != 5 {
		t.Errorf("while the stand-in serves: %+v, want 0 cut, 0 failed, 0 corrupt and events", steady)
	}
	if steady.DelayMaxms <= 0 || steady.DelayP50ms > steady.DelayMaxms {
		t.Errorf("delays p50 %v ms, max %v ms: want measured", steady.DelayP50ms, steady.DelayMaxms)
	}

	srv.Close()
	waitFor(t, status, "every watch cut and a connection failed", func(r LoadReport) bool {
		return r.Window == 1 && r.Cut == 5 && r.Failed > 0
	})
	after := closeWindow(t, next, report, 1)
	if after.Up != 0 || after.CutBy["EOF"]+after.CutBy["reset"] != 5 || after.FirstError == "" {
		t.Errorf("after the stand-in closed: %+v, want 5 watches cut (EOF or reset), none up, the first error", after)
	}
}

// waitFor polls the status file until ok (bounded: a hang fails).
func waitFor(t *testing.T, status, what string, ok func(LoadReport) bool) {
	t.Helper()
	var last LoadReport
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		data, err := os.ReadFile(status)
		if err != nil || json.Unmarshal(data, &last) != nil {
			continue
		}
		if ok(last) {
			return
		}
	}
	t.Fatalf("not %s within 60 s: %+v", what, last)
}

// closeWindow sends SIGUSR1's stand-in and reads window n's report.
func closeWindow(t *testing.T, next chan<- os.Signal, report string, n int) LoadReport {
	t.Helper()
	next <- syscall.SIGUSR1
	var r LoadReport
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		data, err := os.ReadFile(report)
		if err == nil && json.Unmarshal(data, &r) == nil && r.Window == n {
			return r
		}
	}
	t.Fatalf("no report of window %d within 30 s: %+v", n, r)
	return r
}

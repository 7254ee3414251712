package bench

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveBuilt()
	os.Exit(code)
}

// upgradeTable runs `vipproxy-bench --storms upgrade` with 20 watches,
// once, against contenders, and returns its table: row label prefix ->
// contender -> cell.
func upgradeTable(t *testing.T, contenders string) map[string]map[string]string {
	t.Helper()
	bench := testutil.Command(t, "vipproxy-bench")
	vipproxy := testutil.Command(t, "vipproxy")
	out := filepath.Join(t.TempDir(), "storm.md")
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scaled(5*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, bench, "--vipproxy", vipproxy, "--figures", "storm", "--storms", upgradeStorm,
		"--contenders", contenders, "--storm-clients", "20", "--storm-reps", "1", "--pin", "none", "--nice", "0", "--out", out)
	isolate(cmd)
	log, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("vipproxy-bench: %v\n%s", err, log)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	rows := parseTable(string(b))
	if len(rows) == 0 {
		t.Fatalf("no table:\n%s", log)
	}
	t.Logf("vipproxy-bench:\n%s", log)
	return rows
}

// parseTable reads a markdown table whose first column is the figure:
// the upgrade storm's rows by the words after the storm's title.
func parseTable(md string) map[string]map[string]string {
	var header []string
	rows := map[string]map[string]string{}
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if header == nil {
			header = cells
			continue
		}
		label, ok := strings.CutPrefix(cells[0], stormTitles[upgradeStorm]+": ")
		if !ok {
			continue
		}
		rows[label] = map[string]string{}
		for i, c := range cells[1:] {
			if i+1 < len(header) {
				rows[label][header[i+1]] = c
			}
		}
	}
	return rows
}

// cell is the figure of the row starting with prefix for contender.
func cell(t *testing.T, rows map[string]map[string]string, prefix, contender string) string {
	t.Helper()
	for label, row := range rows {
		if strings.HasPrefix(label, prefix) {
			return row[contender]
		}
	}
	t.Fatalf("no row %q in %v", prefix, rows)
	return ""
}

// The upgrade storm restarts vipproxy with the bench standing in for
// systemd (the listener and the file descriptor store kept across the
// restart, their descriptors passed to the new daemon): every watch is
// handed over, none cut, and the request loop's new connections all
// work, timed.
func TestUpgradeStormHandsEveryWatchOver(t *testing.T) {
	rows := upgradeTable(t, "vipproxy")
	for prefix, want := range map[string]string{"watches cut": "0", "events missed": "0", "failed new connections": "0"} {
		if got := cell(t, rows, prefix, "vipproxy"); got != want {
			t.Errorf("vipproxy, %s: %s, want %s", prefix, got, want)
		}
	}
	if n, err := strconv.Atoi(cell(t, rows, "new connections tried", "vipproxy")); err != nil || n < 1 {
		t.Errorf("vipproxy: %d new connections tried (%v), want some", n, err)
	}
	if p99 := cell(t, rows, "new connection, connect to ACK p99", "vipproxy"); p99 == "–" || p99 == "" {
		t.Errorf("vipproxy: no new-connection delay (%q)", p99)
	}
}

// HAProxy in the upgrade storm: its master-worker reload keeps every
// watch with the old worker; its restart cuts them all.
func TestUpgradeStormHAProxyReloadAndRestart(t *testing.T) {
	testutil.Tool(t, "haproxy")
	rows := upgradeTable(t, "haproxy")
	if got := cell(t, rows, "watches cut", "haproxy"); got != "0" {
		t.Errorf("haproxy reload cut %s watches, want 0", got)
	}
	if got := cell(t, rows, "watches cut", haproxyRestart); got != "20" {
		t.Errorf("haproxy restart cut %s watches, want all 20", got)
	}
}

// The upgrade storm's request loop: from the mark, a new connection every
// ProbeEvery, each timed to its ACK, and counted as failed when the proxy
// is gone (refused).
func TestRequestLoopTimesAndCountsNewConnections(t *testing.T) {
	ctx, cli, backends := twoWatchBackends(t)
	addr, stopFloor := startFloor(ctx, t, backends)
	spec := watchSpec{Targets: []string{addr}, Clients: 4, Sources: 1, Period: watchTestPeriod, Wait: 3 * time.Second, ProbeEvery: 10 * time.Millisecond}
	stdin, lines := startWatchClient(ctx, t, spec, cli)
	next := func(cmds ...string) watchResult {
		t.Helper()
		for _, c := range cmds {
			io.WriteString(stdin, c+"\n")
			if c == "mark" && (!lines.Scan() || lines.Text() != markedLine) {
				t.Fatalf("want %s after mark, got %q", markedLine, lines.Text())
			}
			if c == "mark" {
				time.Sleep(300 * time.Millisecond) // the loop runs
			}
		}
		var res watchResult
		if !lines.Scan() || json.Unmarshal(lines.Bytes(), &res) != nil {
			t.Fatalf("no result: %q", lines.Text())
		}
		return res
	}
	if !lines.Scan() || lines.Text() != `{"established":4}` {
		t.Fatalf("want 4 watches established, got %q", lines.Text())
	}
	res := next("mark", "wait none")
	if res.Probes < 1 || res.ProbeFailed != 0 || res.ProbeP50ms <= 0 || res.ProbeMaxMs < res.ProbeP99ms || res.Disrupted != 0 {
		t.Errorf("through a running proxy: %+v, want new connections tried, none failed, their delays, no watch cut", res)
	}
	if err := stopFloor(); err != nil {
		t.Fatalf("floor proxy: %v", err)
	}
	res = next("mark", "wait all")
	if res.Probes < 1 || res.ProbeFailed != res.Probes || res.ProbeFirstError == "" {
		t.Errorf("with no proxy: %+v, want every new connection failed", res)
	}
}

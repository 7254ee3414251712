package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
)

type entry struct {
	msg  string
	pri  journal.Priority
	vars map[string]string
}

func capture(level slog.Level, fail bool) (*slog.Logger, *[]entry, *bytes.Buffer) {
	var got []entry
	var stream bytes.Buffer
	h := &journalHandler{level: level, fallback: &stream, send: func(m string, p journal.Priority, v map[string]string) error {
		if fail {
			return errors.New("no journal socket")
		}
		got = append(got, entry{m, p, v})
		return nil
	}}
	return slog.New(h), &got, &stream
}

func TestPriorityAndFieldsPerLine(t *testing.T) {
	log, got, _ := capture(slog.LevelDebug, false)
	log.Debug("picked backend", "backend", "cp1")
	log.Info("serving", "backends", 3)
	log.Warn("backend down", "backend", "cp2", "reason", "2 consecutive failed checks")
	log.Error("reload failed", "err", errors.New("config.toml:3: bad"))
	want := []entry{
		{"picked backend backend=cp1", journal.PriDebug, map[string]string{"BACKEND": "cp1"}},
		{"serving backends=3", journal.PriInfo, map[string]string{"BACKENDS": "3"}},
		{`backend down backend=cp2 reason="2 consecutive failed checks"`, journal.PriWarning, map[string]string{"BACKEND": "cp2", "REASON": "2 consecutive failed checks"}},
		{`reload failed err="config.toml:3: bad"`, journal.PriErr, map[string]string{"ERR": "config.toml:3: bad"}},
	}
	if len(*got) != len(want) {
		t.Fatalf("%d entries, want %d: %+v", len(*got), len(want), *got)
	}
	for i, w := range want {
		g := (*got)[i]
		w.vars["SYSLOG_IDENTIFIER"] = Identifier
		if g.msg != w.msg || g.pri != w.pri || fmt.Sprint(g.vars) != fmt.Sprint(w.vars) {
			t.Errorf("entry %d:\n got %q %d %v\nwant %q %d %v", i, g.msg, g.pri, g.vars, w.msg, w.pri, w.vars)
		}
		if strings.Contains(g.msg, "time=") {
			t.Errorf("entry %d repeats the time journald records: %q", i, g.msg)
		}
	}
}

func TestLevelFiltersAndGroups(t *testing.T) {
	log, got, _ := capture(slog.LevelInfo, false)
	log.Debug("not sent")
	log.With("backend", "cp1").WithGroup("check").Info("result", "ok", true, slog.Group("tls", "_version", "1.3"), "MESSAGE", "x")
	if len(*got) != 1 {
		t.Fatalf("%d entries, want 1 (debug is below info): %+v", len(*got), *got)
	}
	g := (*got)[0]
	if g.msg != "result backend=cp1 check.ok=true check.tls._version=1.3 check.MESSAGE=x" {
		t.Errorf("message %q", g.msg)
	}
	for k, v := range map[string]string{"BACKEND": "cp1", "CHECK_OK": "true", "CHECK_TLS__VERSION": "1.3", "CHECK_MESSAGE": "x"} {
		if g.vars[k] != v {
			t.Errorf("%s = %q, want %q (all: %v)", k, g.vars[k], v, g.vars)
		}
	}
}

// Without the native socket the line still reaches the journal through
// stderr, its priority in the sd-daemon <N> prefix.
func TestFallbackPrefixesPriority(t *testing.T) {
	log, _, stream := capture(slog.LevelInfo, true)
	log.Warn("backend down", "backend", "cp2", "reason", "line1\nline2")
	if want := "<4>backend down backend=cp2 reason=\"line1\\nline2\"\n"; stream.String() != want {
		t.Fatalf("fallback wrote %q, want %q", stream.String(), want)
	}
}

func TestIsJournalStream(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stream")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	for env, want := range map[string]bool{
		fmt.Sprintf("%d:%d", st.Dev, st.Ino):   true,
		fmt.Sprintf("%d:%d", st.Dev, st.Ino+1): false, // a stream, but not this one
		"":                                     false,
		"garbage":                              false,
	} {
		if got := IsJournalStream(f, env); got != want {
			t.Errorf("JOURNAL_STREAM=%q: %v, want %v", env, got, want)
		}
	}
	var buf bytes.Buffer
	New(&buf, slog.LevelInfo, fmt.Sprintf("%d:%d", st.Dev, st.Ino)).Info("plain", "k", "v")
	if !strings.Contains(buf.String(), "time=") || !strings.Contains(buf.String(), "msg=plain k=v") {
		t.Errorf("outside journald the text is slog's: %q", buf.String())
	}
}

// TestJournalHelper logs as the daemon would; TestRealJournald runs it
// with stderr connected to a real systemd-journald.
func TestJournalHelper(t *testing.T) {
	tag := os.Getenv("VIPPROXY_JOURNAL_HELPER")
	if tag == "" {
		t.Skip("run by TestRealJournald")
	}
	log := New(os.Stderr, slog.LevelInfo, os.Getenv("JOURNAL_STREAM"))
	log.Debug("hidden at info " + tag)
	log.Info("serving "+tag, "backends", 2)
	log.Warn("backend down "+tag, "backend", "cp2", "reason", "2 consecutive failed checks")
	log.Error("reload failed "+tag, "err", "bad key")
	os.Exit(0) // before the test framework prints PASS into the journal
}

const journaldScript = `set -e
mount -t tmpfs tmpfs /run/systemd
mkdir -p /run/log && mount -t tmpfs tmpfs /run/log
mount -t tmpfs tmpfs /var/log # no /var/log/journal: journald keeps to /run/log
/lib/systemd/systemd-journald &
trap 'kill $!; wait $!' EXIT
i=0; until [ -S /run/systemd/journal/socket ]; do i=$((i+1)); [ $i -lt 200 ]; sleep 0.05; done
helper() { VIPPROXY_JOURNAL_HELPER=$1 systemd-cat -t vipproxy sh -c 'JOURNAL_STREAM=$(stat -L -c %d:%i /proc/self/fd/2) exec "$0" -test.run=^TestJournalHelper$' "$TESTBIN"; }
helper native
mv /run/systemd/journal/socket /run/systemd/journal/gone
helper stream
q() { journalctl --no-pager -o json SYSLOG_IDENTIFIER=vipproxy "$@"; }
i=0; until [ "$(q | wc -l)" -ge 6 ]; do i=$((i+1)); [ $i -lt 200 ]; sleep 0.05; done
echo '== all'; q
echo '== warning'; q -p warning
echo '== cp2'; q BACKEND=cp2
`

// TestRealJournald starts systemd-journald in a private mount namespace
// (tmpfs over /run/systemd, /run/log and /var/log) and checks what
// journalctl reads back: priorities, fields, and the <N> fallback.
func TestRealJournald(t *testing.T) {
	for _, p := range []string{"/lib/systemd/systemd-journald", "/usr/bin/journalctl", "/usr/bin/systemd-cat", "/usr/bin/unshare"} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("needs %s", p)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for a mount namespace")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "-m", "--propagation", "private", "sh", "-c", journaldScript)
	cmd.Env = append(os.Environ(), "TESTBIN="+os.Args[0])
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("journald run: %v\n%s", err, out)
	}
	sections := map[string][]map[string]string{}
	var cur string
	for _, line := range strings.Split(string(out), "\n") {
		if name, ok := strings.CutPrefix(line, "== "); ok {
			cur = name
			continue
		}
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) != nil {
			continue
		}
		m := map[string]string{}
		for k, v := range e {
			m[k] = fmt.Sprint(v)
		}
		sections[cur] = append(sections[cur], m)
	}
	msgs := func(name string) []string {
		var out []string
		for _, e := range sections[name] {
			out = append(out, e["PRIORITY"]+" "+e["_TRANSPORT"]+" "+e["MESSAGE"])
		}
		return out
	}
	want := map[string][]string{
		"all": {"6 journal serving native backends=2",
			`4 journal backend down native backend=cp2 reason="2 consecutive failed checks"`,
			"3 journal reload failed native err=\"bad key\"",
			"6 stdout serving stream backends=2",
			`4 stdout backend down stream backend=cp2 reason="2 consecutive failed checks"`,
			"3 stdout reload failed stream err=\"bad key\""},
		"warning": {`4 journal backend down native backend=cp2 reason="2 consecutive failed checks"`,
			"3 journal reload failed native err=\"bad key\"",
			`4 stdout backend down stream backend=cp2 reason="2 consecutive failed checks"`,
			"3 stdout reload failed stream err=\"bad key\""},
		"cp2": {`4 journal backend down native backend=cp2 reason="2 consecutive failed checks"`},
	}
	for name, w := range want {
		// journald reads its native socket and the stream apart: entries
		// of the two transports may interleave in any order.
		got := msgs(name)
		slices.Sort(got)
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Errorf("journalctl (%s):\n got %q\nwant %q\n%s", name, got, w, out)
		}
	}
	for _, e := range sections["cp2"] {
		if e["REASON"] != "2 consecutive failed checks" {
			t.Errorf("REASON field %q", e["REASON"])
		}
	}
}

package config

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO at the config path is refused at once: opening it for reading
// would wait for a writer forever (reload and `vipproxy check` hung).
func TestFIFORefusedWithoutBlocking(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vipproxy.toml")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := Load(path, AllFiles); done <- err }()
	select {
	case err := <-done:
		var ce *Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("Load(FIFO) = %v, want a config error saying it is not a regular file", err)
		}
	case <-time.After(10 * time.Second):
		// Unblock the open so the goroutine ends with the test.
		if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("Load blocked on a FIFO at the config path")
	}
}

// Deeply nested inline tables or arrays are refused before the TOML
// parser sees them: its memory grows quadratically with the depth.
func TestNestingBoundedBeforeParsing(t *testing.T) {
	deep := "x = " + strings.Repeat("{a=", 20000) + "1" + strings.Repeat("}", 20000) + "\n"
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Parse("deep.toml", []byte("# comment [ { \n[vip]\n"+deep))
	runtime.ReadMemStats(&after)
	var ce *Error
	if !errors.As(err, &ce) || ce.Line != 3 || !strings.Contains(ce.Reason, "nested deeper than") {
		t.Fatalf("Parse(20,000 nested tables) = %v, want a nesting error on line 3", err)
	}
	t.Logf("refused with %d KiB allocated", (after.TotalAlloc-before.TotalAlloc)>>10)
	long := "[health]\n" + strings.Repeat("a.", 16000) + "b = 1\n" // 9.7 GB allocated by the parser
	if err := checkNesting("long.toml", []byte(long)); err == nil || !strings.Contains(err.Error(), "long.toml:2: a dotted key") {
		t.Errorf("a 16,000-part dotted key: %v, want refused on line 2", err)
	}
	for _, ok := range []string{
		"f = [1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5]\n",
		"a.\"b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.a.b.c.d.e.f.g.h.i\".c = 1\n",
		"a = [[1, 2], [3]]\n",
		"s = \"[[[[{{{{\"\nt = '{{{{[[[['\nu = \"\"\"\n[[[[\n\"\"\"\n# [[[[[[\n",
		"[[backend]]\nname = \"x\"\n",
	} {
		if err := checkNesting("ok.toml", []byte(ok)); err != nil {
			t.Errorf("checkNesting(%q) = %v, want nil", ok, err)
		}
	}
}

// The default check asks the apiserver itself (GET /readyz, 200): a
// wedged one that accepts and never answers passed the old tcp default.
func TestDefaultCheckIsHTTPSReadyz(t *testing.T) {
	cfg, err := Parse("min.toml", []byte("[vip]\naddresses = [\"10.0.0.10\"]\n[[backend]]\naddress = \"10.0.0.1:6443\"\n[network]\nuplinks = [\"eth0\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if h := cfg.Health; h.Type != CheckHTTPS || h.Path != "/readyz" || h.ExpectStatus != 200 {
		t.Errorf("default check %s %s expecting %d, want https /readyz expecting 200", h.Type, h.Path, h.ExpectStatus)
	}
}

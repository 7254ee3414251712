package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryLockIsRanked: every mutex in the code of the data path, this
// package and the connection layer above it (service/proxy), is a Mutex
// (so that the race tests check its order), and the package doc names
// every rank in the order of their ranks.
func TestEveryLockIsRanked(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	above, err := filepath.Glob("../*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, above...)
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "lockrank_check.go" || name == "lockorder.go" {
			continue // the tracker's own lock, and the one inside rankedMutex
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "sync" && strings.Contains(sel.Sel.Name, "Mutex") {
				t.Errorf("%s: a sync.%s; the data path's locks are engine.Mutex, with a rank in the lock order (lockorder.go, the package doc)", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src)
	doc = doc[strings.Index(doc, "// Lock order."):strings.Index(doc, "package engine")]
	doc = strings.ReplaceAll(doc, "\n// ", " ")
	last := -1
	for r := rankPark; r <= rankKeep; r++ {
		at := strings.Index(doc, r.String())
		if at < 0 {
			t.Errorf("the package doc's lock order does not name %v", r)
			continue
		}
		if at < last {
			t.Errorf("the package doc names %v before the lock ranked below it", r)
		}
		last = at
	}
}

// TestLockOrderIsChecked: in the race detector's builds, taking a lock
// of a lower rank than one held (a direction's pk.mu under its session's
// mu, a lock of the connection layer) panics, naming both.
func TestLockOrderIsChecked(t *testing.T) {
	if !LockRankChecked {
		t.Skip("the lock order is checked under -race or -tags vipproxy_lockrank")
	}
	var s struct { // a session's lock, as service/proxy holds it
		mu     Mutex[SessionLock]
		closed bool
	}
	var d direction
	got := func() (msg any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		defer func() { msg = recover() }()
		d.pk.mu.Lock()
		d.pk.parks++
		d.pk.mu.Unlock()
		return nil
	}()
	want := "lock order: parkState.mu taken while holding session.mu"
	if m, _ := got.(string); !strings.HasPrefix(m, want) {
		t.Fatalf("pk.mu under s.mu: got %v, want a panic %q", got, want)
	}
	// The right order passes, and nothing is left held.
	d.pk.mu.Lock()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	d.pk.mu.Unlock()
	s.mu.Lock()
	s.closed = false
	s.mu.Unlock()
	if d.pk.parks != 0 {
		t.Errorf("the lock taken out of order was held: %d", d.pk.parks)
	}
}

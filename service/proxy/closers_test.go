package proxy

import (
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// theClosers are the only functions that may close a client or a backend
// socket (session.go).
var theClosers = map[string]bool{"closeClient": true, "closeBackend": true}

// otherCloses are the closes in the package and in its I/O engine
// (package engine, "engine." before the function) that are not of a
// session's socket, by function and by what they close, each with its
// reason. A close of a socket anywhere else fails
// TestOnlyTheClosersCloseSockets: the engine closes only what it made
// (its epolls, its pipes, a socket's duplicates, the descriptor at its
// last reference after the closer's Close) and calls back into the
// session (engine.Conn) for the rest.
var otherCloses = map[string]string{
	"engine.rawListener.Close: l.file.Close":     "the listener's duplicate, held as a file to wait on",
	"engine.rawListener.Close: l.Listener.Close": "the listener itself",
	"Proxy.StopAccepting: ln.Close":              "a listener",
	"Proxy.Close: p.relay.Close":                 "the engine: its parkers' epolls and its pooled pipes",
	"engine.FileConn.Close: w.Close":             "the socket's duplicate in Go's poller, as the closer closes the socket",
	"engine.FileConn.release: SYS_CLOSE":         "the descriptor, at the last reference after the closer's Close (fdRefs)",
	"engine.FileConn.demote: w.Close":            "the socket's duplicate in Go's poller; the socket stays open",
	"engine.FileConn.promote: w.Close":           "a duplicate that could not join Go's poller",
	"engine.newParker: unix.Close":               "the parker's epoll, before it is a file",
	"engine.newParker: f.Close":                  "the parker's epoll",
	"engine.parker.close: p.file.Close":          "the parker's epoll",
	"engine.pipe.close: unix.Close":              "a splice pipe's two ends",
	"Pair.Files: client.Close":                   "a duplicate made for a handover, not the session's socket",
	"takeSocket: f.Close":                        "the file a handover passed; its duplicate becomes the socket",
}

// closeCall names the close a call makes, "" if it makes none: a method
// Close without arguments, unix.Close or syscall.Close, or a system call
// SYS_CLOSE.
func closeCall(fset *token.FileSet, call *ast.CallExpr) string {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "Close" {
			return "Close"
		}
		return ""
	}
	if pkg, ok := sel.X.(*ast.Ident); ok && (pkg.Name == "unix" || pkg.Name == "syscall") {
		if sel.Sel.Name == "Close" {
			return pkg.Name + ".Close"
		}
		for _, a := range call.Args {
			if as, ok := a.(*ast.SelectorExpr); ok && as.Sel.Name == "SYS_CLOSE" {
				return "SYS_CLOSE"
			}
		}
		return ""
	}
	if sel.Sel.Name != "Close" || len(call.Args) != 0 {
		return ""
	}
	var b strings.Builder
	printer.Fprint(&b, fset, sel)
	return b.String()
}

// funcName is "Recv.Name" for a method, "Name" for a function.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if st, ok := t.(*ast.StarExpr); ok {
		t = st.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

// packageCloses lists every close in the non-test Go files of dir and
// in the plain engine, as
// "function: what", with where it is.
func packageCloses(t *testing.T, dir string) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	out := map[string][]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") && name != filepath.Join(dir, "plainengine_test.go") {
			continue // the plain engine is held to the rule too
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if what := closeCall(fset, call); what != "" {
						key := funcName(fn) + ": " + what
						out[key] = append(out[key], fset.Position(call.Pos()).String())
					}
				}
				return true
			})
		}
	}
	return out
}

// TestOnlyTheClosersCloseSockets: closeClient and closeBackend are the only
// code that closes a client or a backend socket; every other close in the
// package and in the engine is of something else (a listener, a pipe, the parker's epoll, a
// duplicate) and listed with its reason in otherCloses, which holds no
// entry that is not used.
func TestOnlyTheClosersCloseSockets(t *testing.T) {
	closes := packageCloses(t, ".")
	for key, at := range packageCloses(t, "engine") {
		closes["engine."+key] = at
	}
	var keys []string
	for k := range closes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		fn := key[:strings.Index(key, ":")]
		if theClosers[fn] || otherCloses[key] != "" {
			continue
		}
		t.Errorf("%s: %s closes outside closeClient and closeBackend; a client or backend socket must close through them (session.go), anything else is listed in otherCloses with its reason", strings.Join(closes[key], ", "), key)
	}
	for key := range otherCloses {
		if closes[key] == nil {
			t.Errorf("otherCloses lists %q, which the package no longer has", key)
		}
	}
	for fn := range theClosers {
		found := false
		for key := range closes {
			found = found || strings.HasPrefix(key, fn+": ")
		}
		if !found {
			t.Errorf("%s closes nothing", fn)
		}
	}
}

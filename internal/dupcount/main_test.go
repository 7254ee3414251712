package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Two test files that import the same packages and open with a test
// func (b_test.go is a_test.go for b), and a file whose lines after its
// import are code.
const aTest = `package a

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
)

// TestA is about a.
func TestA(t *testing.T) {
	t.Log(context.Background(), errors.New("a"), fmt.Sprint(), net.IPv4len, os.Args)
}
`

var tree = map[string]string{
	"a_test.go": aTest,
	"b_test.go": strings.NewReplacer("package a", "package b", "TestA", "TestB", "about a", "about b", `"a"`, `"b"`).Replace(aTest),
	"c.go": `package c

import "fmt"

func c() {
	x := 1
	y := 2
	z := x + y
	fmt.Println(x)
	fmt.Println(y)
	fmt.Println(z)
	fmt.Println(x, y, z)
}
`,
}

func dupcount(t *testing.T, listing string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	for name, text := range tree {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	err := run(strings.NewReader(listing), &out, dir)
	return out.String(), err
}

func TestImportBlocksLeftOut(t *testing.T) {
	out, err := dupcount(t, `5 pairs of places (3 files read), each sharing runs of 6 or more identical or same-shape lines
D1 c.go:6-12 ~ c.go:6-12 shape
D2 a_test.go:4-9 ~ b_test.go:4-9
D3 a_test.go:4-13 ~ b_test.go:4-13 shape
D4 nix/lib.nix:1-9 ~ nix/lib.nix:20-28 shape
D5 a_test.go:4-13 ~ b_test.go:4-13 shape (+1 more run)
left out: 4 runs of 6 lines that stand in more than 8 places each (too common to list)
`)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"D1 c.go", "D4 nix/lib.nix", "D5 a_test.go", "left out: 4 runs",
		"dupcount: 3 pairs beyond Go import blocks (3 listed, 2 on import blocks left out, 0 not listed)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, gone := range []string{"D2 ", "D3 "} {
		if strings.Contains(out, gone) {
			t.Errorf("a pair of import blocks (%s) was kept:\n%s", gone, out)
		}
	}
}

// The pairs --most left out of the rows count: nothing says they are
// import blocks.
func TestUnlistedPairsCount(t *testing.T) {
	out, err := dupcount(t, `4 pairs of places (3 files read), each sharing runs of 6 or more identical or same-shape lines
D1 a_test.go:4-9 ~ b_test.go:4-9
(+3 more pairs)
`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "dupcount: 3 pairs beyond Go import blocks (0 listed, 1 on import blocks left out, 3 not listed)") {
		t.Errorf("output:\n%s", out)
	}
	out, err = dupcount(t, "no duplicates (3 files read)\n")
	if err != nil || !strings.Contains(out, "dupcount: 0 pairs") {
		t.Errorf("no pairs: %v\n%s", err, out)
	}
}

// An output the tool never wrote is an error, not a count of 0.
func TestUnknownListing(t *testing.T) {
	for _, listing := range []string{"", "usage: duplicates ...\n"} {
		if out, err := dupcount(t, listing); err == nil {
			t.Errorf("%q: no error, output %q", listing, out)
		}
	}
	if _, err := dupcount(t, "1 pairs of places\nD1 missing.go:1-9 ~ a_test.go:4-9\n"); err == nil || !strings.Contains(err.Error(), "missing.go") {
		t.Errorf("a row naming a file that is not there: %v, want an error naming it", err)
	}
}

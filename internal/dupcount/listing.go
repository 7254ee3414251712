package main

import (
	"bufio"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// listing is the duplicates tool's output: the count line, one row a
// pair, and the lines after the rows ("(+N more pairs)", "left out:",
// "incomplete:"), kept as they are.
type listing struct {
	total   int
	rows    []row
	trailer []string
}

// row is one pair: `D1 a.go:10-24 ~ b.go:40-54 [shape] [(+N more runs)]`.
type row struct {
	text     string
	sides    [2]side
	moreRuns bool
}

type side struct {
	path       string
	first, end int // lines, both included
}

var (
	countLine    = regexp.MustCompile(`^(\d+|no) (pairs? of places|duplicates)`)
	rowLine      = regexp.MustCompile(`^D\d+ (\S+):(\d+)-(\d+) ~ (\S+):(\d+)-(\d+)(.*)$`)
	moreRunsNote = regexp.MustCompile(`\(\+\d+ more runs?\)`)
)

// parseListing reads the listing; an output it does not know (the tool
// changed its format) is an error rather than a wrong count.
func parseListing(sc *bufio.Scanner) (listing, error) {
	var l listing
	if !sc.Scan() {
		return l, errors.New("empty")
	}
	m := countLine.FindStringSubmatch(sc.Text())
	if m == nil {
		return l, fmt.Errorf("first line %q: want the count of pairs", sc.Text())
	}
	if m[1] != "no" {
		l.total, _ = strconv.Atoi(m[1])
	}
	for sc.Scan() {
		line := sc.Text()
		m := rowLine.FindStringSubmatch(line)
		if m == nil {
			l.trailer = append(l.trailer, line)
			continue
		}
		r := row{text: line, moreRuns: moreRunsNote.MatchString(m[7])}
		for i := range r.sides {
			first, _ := strconv.Atoi(m[2+3*i])
			end, _ := strconv.Atoi(m[3+3*i])
			r.sides[i] = side{path: m[1+3*i], first: first, end: end}
		}
		l.rows = append(l.rows, r)
	}
	return l, sc.Err()
}

// minLines is the duplicates tool's run length (--min-lines, 6): fewer
// shared lines make no pair.
const minLines = 6

// importsOnly says whether the pair stands on Go import blocks alone: on
// one side at least, fewer than minLines of its lines that the tool reads
// (not blank, not a comment, not lone punctuation) lie outside the file's
// import blocks. Such a pair is an import block and the line or two
// around it (a test's first func line). A pair whose files share more
// runs than the one named may share real code too: it counts.
func (r row) importsOnly(b *importBlocks) (bool, error) {
	if r.moreRuns {
		return false, nil
	}
	for _, s := range r.sides {
		n, err := b.linesOutside(s)
		if err != nil {
			return false, err
		}
		if n < minLines {
			return true, nil
		}
	}
	return false, nil
}

// span is an import block's lines, from `import (` to `)`.
type span struct{ first, end int }

// goFile is a Go file's lines and import blocks.
type goFile struct {
	lines   []string
	imports []span
}

// importBlocks reads each Go file once.
type importBlocks struct {
	root  string
	files map[string]goFile
}

// linesOutside counts the lines of s that the tool reads and that lie
// outside import blocks; a file that is no Go file has no import block.
func (b *importBlocks) linesOutside(s side) (int, error) {
	if !strings.HasSuffix(s.path, ".go") {
		return s.end - s.first + 1, nil
	}
	f, ok := b.files[s.path]
	if !ok {
		var err error
		if f, err = readGoFile(filepath.Join(b.root, s.path)); err != nil {
			return 0, err
		}
		b.files[s.path] = f
	}
	n := 0
	for line := s.first; line <= s.end && line <= len(f.lines); line++ {
		inImports := slices.ContainsFunc(f.imports, func(sp span) bool { return sp.first <= line && line <= sp.end })
		if !inImports && counted(f.lines[line-1]) {
			n++
		}
	}
	return n, nil
}

// counted says whether the tool reads the line: not blank, not a
// comment, not lone punctuation.
func counted(line string) bool {
	t := strings.TrimSpace(line)
	return t != "" && !strings.HasPrefix(t, "//") && strings.Trim(t, "(){}[],;") != ""
}

func readGoFile(path string) (goFile, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return goFile{}, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ImportsOnly)
	if err != nil {
		return goFile{}, fmt.Errorf("reading its imports: %w", err)
	}
	out := goFile{lines: strings.Split(string(src), "\n")}
	for _, d := range f.Decls {
		out.imports = append(out.imports, span{fset.Position(d.Pos()).Line, fset.Position(d.End()).Line})
	}
	return out, nil
}

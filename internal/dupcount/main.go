// Command dupcount counts the pairs of repeated code that the
// `duplicates` tool lists, leaving out those that stand on Go import
// blocks: the tool passes over import lines, but not the lines inside
// `import ( ... )`, so two files that import the same six packages in a
// row are a pair that no merge can remove. It reads the tool's output
// (`duplicates --most 200`) on stdin, run in the tree it read, prints the
// rows it keeps, and last a line "dupcount: N pairs ..." for
// `make check-duplicates` (docs/development.md).
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
)

func main() {
	if err := run(os.Stdin, os.Stdout, "."); err != nil {
		fmt.Fprintln(os.Stderr, "dupcount:", err)
		os.Exit(1)
	}
}

// run filters the listing on in, with paths relative to root, onto out.
func run(in io.Reader, out io.Writer, root string) error {
	l, err := parseListing(bufio.NewScanner(in))
	if err != nil {
		return fmt.Errorf("reading the duplicates listing: %w", err)
	}
	blocks := importBlocks{root: root, files: map[string]goFile{}}
	kept, dropped := 0, 0
	for _, r := range l.rows {
		only, err := r.importsOnly(&blocks)
		if err != nil {
			return fmt.Errorf("row %q: %w", r.text, err)
		}
		if only {
			dropped++
			continue
		}
		kept++
		fmt.Fprintln(out, r.text)
	}
	for _, line := range l.trailer {
		fmt.Fprintln(out, line)
	}
	// Pairs --most left out of the rows are counted, unread: more than it
	// shows is past any sane limit anyway.
	n := l.total - dropped
	fmt.Fprintf(out, "dupcount: %d pairs beyond Go import blocks (%d listed, %d on import blocks left out, %d not listed)\n",
		n, kept, dropped, l.total-len(l.rows))
	return nil
}

package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/vipproxy/vipproxy/service/atomicfile"
)

// printFiles prints rendered files to w, each after a "# PATH" line: what
// "render" means for every command (print, never write).
func printFiles(w io.Writer, files []atomicfile.File) {
	for i, f := range files {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "# %s\n", f.Path)
		w.Write(f.Data)
	}
}

// printDiffs prints, for each file whose content on disk differs from the
// rendered one, a unified-style line diff (--diff: the dry run of a
// writing command), and returns how many differ.
func printDiffs(w io.Writer, files []atomicfile.File) int {
	n := 0
	for _, f := range files {
		old, err := os.ReadFile(f.Path)
		if err == nil && bytes.Equal(old, f.Data) {
			continue
		}
		n++
		from := f.Path
		if err != nil {
			from = "/dev/null"
		}
		fmt.Fprintf(w, "--- %s\n+++ %s\n", from, f.Path)
		for _, l := range lineDiff(splitLines(string(old)), splitLines(string(f.Data))) {
			fmt.Fprintln(w, l)
		}
	}
	if n == 0 {
		fmt.Fprintln(w, "no changes")
	}
	return n
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// lineDiff is the longest-common-subsequence diff of two short files:
// " " kept, "-" removed, "+" added lines.
func lineDiff(a, b []string) []string {
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			out = append(out, " "+a[i])
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			out = append(out, "-"+a[i])
			i++
		default:
			out = append(out, "+"+b[j])
			j++
		}
	}
	return out
}

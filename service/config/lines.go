package config

import (
	"strconv"
	"strings"
)

// keyLine finds the line that sets key (a path like "backend[1].address")
// in TOML source, so errors found after decoding can still point at a line.
// The TOML decoder does not expose key positions, so this is a line scanner
// for the usual layout: [table] and [[array]] headers and `key = value`
// lines, dotted keys included. When the key itself is not written (a default
// broke a rule, or an inline table) it returns the line of its deepest
// written parent; 0 when nothing matches.
func keyLine(src, key string) int {
	want := splitKey(key)
	arrayCount := map[string]int{}
	var table []string
	best, bestLen := 0, 0
	for i, raw := range strings.Split(src, "\n") {
		line := strings.TrimSpace(stripComment(raw))
		var path []string
		switch {
		case strings.HasPrefix(line, "[["):
			name := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(line, "[["), "]]"))
			n := arrayCount[name]
			arrayCount[name]++
			table = append(splitDotted(name), "["+strconv.Itoa(n)+"]")
			path = table
		case strings.HasPrefix(line, "["):
			table = inLastElement(splitDotted(strings.TrimSpace(strings.Trim(line, "[]"))), arrayCount)
			path = table
		default:
			k, _, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			path = append(append([]string(nil), table...), splitDotted(k)...)
		}
		n := commonPrefix(path, want)
		// A line matches when it writes the key's parent (a default broke a
		// rule) or the key itself, also as a table header ([[backends]]).
		if (n == len(path) || n == len(want)) && n > bestLen {
			best, bestLen = i+1, n
			if n == len(want) {
				return best
			}
		}
	}
	return best
}

// inLastElement places a sub-table header under the last element of the
// array of tables it extends: after the second [[port]], [port.health] is
// port[1].health.
func inLastElement(parts []string, arrayCount map[string]int) []string {
	for i := len(parts) - 1; i > 0; i-- {
		if n := arrayCount[strings.Join(parts[:i], ".")]; n > 0 {
			out := append(append([]string(nil), parts[:i]...), "["+strconv.Itoa(n-1)+"]")
			return append(out, parts[i:]...)
		}
	}
	return parts
}

// splitKey turns "backend[1].address" into ["backend", "[1]", "address"].
func splitKey(key string) []string {
	var parts []string
	for _, p := range splitDotted(key) {
		name, idx, ok := strings.Cut(p, "[")
		parts = append(parts, name)
		for ok {
			var i string
			i, idx, _ = strings.Cut(idx, "]")
			parts = append(parts, "["+i+"]")
			_, idx, ok = strings.Cut(idx, "[")
		}
	}
	return parts
}

// splitDotted splits a dotted TOML key, dropping quotes and spaces.
func splitDotted(k string) []string {
	parts := strings.Split(k, ".")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), `"'`)
	}
	return parts
}

// stripComment cuts a trailing # comment that is not inside a string.
func stripComment(line string) string {
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == 0 && (r == '"' || r == '\''):
			quote = r
		case quote == 0 && r == '#':
			return line[:i]
		}
	}
	return line
}

func commonPrefix(a, b []string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

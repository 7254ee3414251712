package keepalived

import (
	"fmt"
	"iter"
	"strconv"
	"strings"
)

// This file reads ~SEQ and ~LST lines as keepalived 2.2.7 does
// (lib/parser.c: add_seq, add_lst, and read_line, which generates their
// lines). "~SEQ(VAR, [START,] [STEP,] END) TEXT" reads TEXT once for each
// number from START to END, VAR defined as that number ("~SEQx" in
// lowercase hexadecimal); "~LST(VAR, V1, V2, ...) TEXT" once for each
// value, and "~LST({A, B}, {A1, B1}, {A2}, ...) TEXT" once for each set of
// values, a missing one blank. Each generated line is read as a line of
// the file, the definitions kept after it: it may be a ~SEQ or ~LST of its
// own, nested within, or a definition, or a conditional line.

// maxGeneratedLines bounds the lines ~SEQ, ~LST and multiline
// definitions generate in reading one configuration: keepalived would read
// ~SEQ(i, 1, 1, 1000000000) to its end, a billion lines, and a ~SEQ of
// multiline definitions multiplies their lines.
const maxGeneratedLines = 10000

// seqParamsLen is add_seq's buffer for the numbers of a ~SEQ, substituted
// there: three longs of 20 characters, each with the "," or ")" after it,
// and the terminating NUL.
const seqParamsLen = 3*20 + 3 + 1

// generation is what a ~SEQ or ~LST line generates: its text, once for
// each set of values its variables take, in order.
type generation struct {
	vars   []string
	values iter.Seq[[]string]
	text   string
}

// generate reads the lines a ~SEQ or ~LST line generates, as keepalived
// reads them (read_line): each variable is defined before each line, and
// the line is read in full, nested ones too, before the next. A malformed
// line generates nothing: keepalived reports it and reads on.
func (r *reader) generate(file string, num int, text string, depth int) error {
	g, err := r.generation(file, text)
	if err != nil || g == nil {
		if err == nil && text[1] == 'L' && r.malformedLst == "" {
			r.malformedLst = fmt.Sprintf("%s:%d", file, num)
		}
		return err
	}
	r.generators++
	for values := range g.values {
		if !r.countGenerated() {
			return fmt.Errorf("%s generates over %d lines, with the ~SEQ, ~LST and multiline definitions before it (keepalived would read them all; vipproxy reads no more)", spec(text), maxGeneratedLines)
		}
		for i, name := range g.vars {
			r.set(name, values[i])
		}
		if err := r.process(file, num, g.text, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// checkLstCount fails when keepalived miscounts the ~SEQ and ~LST lines
// it is generating: a malformed ~LST takes one off its count though it was
// never counted (add_lst frees it with free_seq_lst), and the count is
// carried on to the next read (init_data does not reset it), that of the
// VRRP process forked after the parent's read. Its ~SEQ and ~LST lines are
// then generated later than written, with other values, or not at all
// (read_line: seq_list_count > multiline_seq_depth); as seen with
// keepalived 2.2.7, which vipproxy does not follow there.
func (r *reader) checkLstCount() error {
	if r.malformedLst == "" || r.generators == 0 {
		return nil
	}
	return fmt.Errorf("%s: malformed ~LST: keepalived then miscounts its ~SEQ and ~LST lines and generates them out of place or not at all, which vipproxy does not follow; correct the ~LST", r.malformedLst)
}

// countGenerated counts a line that a ~SEQ, ~LST or multiline definition
// generates: false past maxGeneratedLines.
func (r *reader) countGenerated() bool {
	r.generated++
	return r.generated <= maxGeneratedLines
}

// spec is a ~SEQ or ~LST line up to its ")", for errors.
func spec(text string) string {
	if end := strings.IndexByte(text, ')'); end >= 0 {
		return text[:end+1]
	}
	return text
}

// generation reads a ~SEQ or ~LST line; nil if keepalived finds it
// malformed.
func (r *reader) generation(file, text string) (*generation, error) {
	if text[1] == 'S' {
		return r.seq(file, text)
	}
	return lst(text), nil
}

// set defines name as keepalived's set_definition does: a definition
// already there takes the value in place (a pre-defined one computed no
// more), whether multiline unchanged.
func (r *reader) set(name, value string) {
	if d := r.defs[name]; d != nil {
		d.value, d.builtin = value, nil
		return
	}
	r.defs[name] = &definition{value: value}
}

// seq reads "~SEQ(VAR, [START,] [STEP,] END) TEXT" as add_seq does: the
// numbers are substituted (in a buffer of seqParamsLen) and read as strtol
// reads them, in any base C allows, with one number the END from 1 (or -1),
// with two a step of 1 or -1; three may not step away from END.
func (r *reader) seq(file, text string) (*generation, error) {
	p, hex := strings.CutPrefix(text[len("~SEQ"):], "x")
	p, ok := strings.CutPrefix(trimBlanks(p), "(")
	if !ok {
		return nil, nil
	}
	p = trimBlanks(p)
	name := p[:spanNot(p, " \t,)")]
	p = trimBlanks(p[len(name):])
	if p == "" || p[0] == ')' || name == "" {
		return nil, nil
	}
	// add_seq takes whatever follows the name for its ",".
	p = trimBlanks(p[1:])
	end := strings.IndexByte(p, ')')
	if end < 0 || end+2 > seqParamsLen {
		return nil, nil
	}
	// A multiline definition cannot be substituted here: it must end the
	// text, which ends with ")".
	params, _, _, err := r.substitute(file, p[:end+1], seqParamsLen)
	if err != nil {
		return nil, fmt.Errorf("substitute in the numbers of %s: %w", spec(text), err)
	}
	start, step, last, ok := seqRange(params)
	if !ok || hex && (start < 0 || last < 0) {
		return nil, nil
	}
	return &generation{vars: []string{name}, values: seqValues(start, step, last, hex), text: trimBlanks(p[end+1:])}, nil
}

// seqRange reads the numbers of a ~SEQ, "END)", "START, END)" or "START,
// STEP, END)", as add_seq does; false if malformed.
func seqRange(params string) (start, step, last int64, ok bool) {
	one, p := strtol(params)
	if p = trimBlanks(p); strings.HasPrefix(p, ")") {
		start, step = 1, 1
		if one < 1 {
			step = -1
		}
		if one < 0 {
			start = -1
		}
		return start, step, one, true
	}
	if !strings.HasPrefix(p, ",") {
		return 0, 0, 0, false
	}
	two, p := strtol(p[1:])
	if p = trimBlanks(p); strings.HasPrefix(p, ")") {
		step = 1
		if one > two {
			step = -1
		}
		return one, step, two, true
	}
	if !strings.HasPrefix(p, ",") {
		return 0, 0, 0, false
	}
	three, p := strtol(p[1:])
	if !strings.HasPrefix(trimBlanks(p), ")") {
		return 0, 0, 0, false
	}
	if two == 0 || one < three && two < 0 || one > three && two > 0 {
		return 0, 0, 0, false
	}
	return one, two, three, true
}

// seqValues are the numbers of a ~SEQ as read_line generates them, in
// decimal or in lowercase hexadecimal: from start by step until past last
// (in C's long, which wraps: a sequence that steps past the largest may
// not end, and maxGeneratedLines ends it).
func seqValues(start, step, last int64, hex bool) iter.Seq[[]string] {
	return func(yield func([]string) bool) {
		for next := start; ; {
			value := strconv.FormatInt(next, 10)
			if hex {
				value = strconv.FormatUint(uint64(next), 16)
			}
			if !yield([]string{value}) {
				return
			}
			next += step
			if step > 0 && next > last || step < 0 && next < last {
				return
			}
		}
	}
}

// lst reads "~LST(VARS, VALUES, ...) TEXT" as add_lst does: VARS one name
// or names in braces, each VALUES one value or values in braces, no more
// than the names, those missing blank; nil if malformed.
func lst(text string) *generation {
	p, ok := strings.CutPrefix(trimBlanks(text[len("~LST"):]), "(")
	if !ok {
		return nil
	}
	vars, p, ok := lstNames(trimBlanks(p))
	if !ok {
		return nil
	}
	var sets [][]string
	for {
		var set []string
		if set, p, ok = lstValues(p, len(vars)); !ok {
			return nil
		}
		sets = append(sets, set)
		if strings.HasPrefix(p, ")") {
			break
		}
		if !strings.HasPrefix(p, ",") {
			return nil
		}
		p = trimBlanks(p[1:])
	}
	return &generation{vars: vars, values: func(yield func([]string) bool) {
		for _, set := range sets {
			if !yield(set) {
				return
			}
		}
	}, text: trimBlanks(p[1:])}
}

// lstNames reads the variables of a ~LST, a name or names in braces, and
// the "," after them; it returns the rest, blanks skipped.
func lstNames(p string) ([]string, string, bool) {
	names, p, ok := lstItems(p, " \t,}", 0)
	if !ok {
		return nil, "", false
	}
	p, ok = strings.CutPrefix(p, ",")
	return names, trimBlanks(p), ok
}

// lstValues reads one set of values of a ~LST for n variables, a value or
// values in braces, padded with blanks to n; it returns the rest from the
// "," or ")" after them.
func lstValues(p string, n int) ([]string, string, bool) {
	set, p, ok := lstItems(p, " \t,})", n)
	if !ok {
		return nil, "", false
	}
	for len(set) < n {
		set = append(set, "")
	}
	return set, p, true
}

// lstItems reads one item, or items in braces, of a ~LST, each ended by a
// blank or one of stops; at most max items (0: any number; keepalived:
// "too many values"). It returns the rest from the "," or ")" after them,
// past the closing brace.
func lstItems(p, stops string, max int) ([]string, string, bool) {
	endChar := byte(',')
	if strings.HasPrefix(p, "{") {
		endChar, p = '}', trimBlanks(p[1:])
	}
	var items []string
	for {
		item := p[:spanNot(p, stops)]
		items = append(items, item)
		p = trimBlanks(p[len(item):])
		if p != "" && (p[0] == endChar || p[0] == ')' && endChar == ',') {
			break
		}
		if !strings.HasPrefix(p, ",") || max > 0 && len(items) >= max {
			return nil, "", false
		}
		p = trimBlanks(p[1:])
	}
	if endChar == '}' {
		p = trimBlanks(p[1:])
	}
	return items, p, true
}

// strtol reads a number as C's strtol(s, &end, 0) does: blanks, a sign,
// hexadecimal after 0x, octal after 0, else decimal, the largest (or
// least) long if out of range; the rest is s, whole, if there is none.
func strtol(s string) (int64, string) {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	neg := i < len(s) && s[i] == '-'
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	base := uint64(10)
	switch {
	case strings.HasPrefix(s[i:], "0x") || strings.HasPrefix(s[i:], "0X"):
		if i+2 < len(s) && digitValue(s[i+2]) < 16 {
			base, i = 16, i+2
		} else {
			return 0, s[i+1:] // "0", the x after it not read
		}
	case strings.HasPrefix(s[i:], "0"):
		base = 8
	}
	const limit = uint64(1) << 63 // the magnitude of the least long
	var n uint64
	digits := 0
	for ; i < len(s) && digitValue(s[i]) < base; i++ {
		digits++
		if n <= (limit-digitValue(s[i]))/base {
			n = n*base + digitValue(s[i])
		} else {
			n = limit + 1 // out of range, clamped below
		}
	}
	if digits == 0 {
		return 0, s
	}
	switch {
	case neg && n >= limit:
		return -1 << 63, s[i:]
	case neg:
		return -int64(n), s[i:]
	case n >= limit:
		return 1<<63 - 1, s[i:]
	}
	return int64(n), s[i:]
}

// digitValue is c's value as a digit in any base up to 36; 36 if none.
func digitValue(c byte) uint64 {
	switch {
	case '0' <= c && c <= '9':
		return uint64(c - '0')
	case 'a' <= c && c <= 'z':
		return uint64(c-'a') + 10
	case 'A' <= c && c <= 'Z':
		return uint64(c-'A') + 10
	}
	return 36
}

// spanNot is C's strcspn: the length of s's start that holds none of set.
func spanNot(s, set string) int {
	if i := strings.IndexAny(s, set); i >= 0 {
		return i
	}
	return len(s)
}

func trimBlanks(s string) string { return strings.TrimLeft(s, " \t") }

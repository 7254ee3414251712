package keepalived

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// This file reads a keepalived configuration the way keepalived 2.2.7's
// parser does before it looks at a keyword (lib/parser.c: read_line,
// decomment, check_include, check_definition, replace_param, add_seq,
// add_lst, alloc_strvec_r), so that the checks see the statements
// keepalived sees: long lines in pieces, comments that are not inside
// double quotes, conditional lines (@id, @^id), parameter substitution
// ($NAME=value, multiline definitions, $NAME and ${NAME}), the lines ~SEQ
// and ~LST generate (seq.go), the include variants, parameters
// substituted in them (include ${DIR}/x.conf), each file included in place
// but directories and executable files (configFile), and the text after a
// "{" or "}" outside quotes read again as a line of its own, through all
// of that (atBrace: "virtual_ipaddress { @id VIP }").
// What keepalived's VRRP and checker processes read is what counts: they
// read keepalived's copy of the configuration, where each include line
// written as one is left out and the files it includes are put in its
// place. Not read: ${_RANDOM}, left as written. Refused, as vipproxy does
// not follow keepalived there: an include that a condition, a parameter,
// ~SEQ, ~LST, a multiline definition or the text after a brace makes
// (those processes read its files twice, or in part: madeInclude), an
// include line within a multiline definition or using one, substitution
// that does not end, more than maxGeneratedLines lines generated (by
// ~SEQ, ~LST and multiline definitions), and ~SEQ or ~LST lines beside a
// malformed ~LST (checkLstCount).

// maxIncludeDepth stops include loops (a file including itself).
const maxIncludeDepth = 8

// maxLineLen is keepalived's line buffer (MAXBUF): a longer line is read
// in pieces (pieces), and a substitution that would make a line longer is
// not made, as there.
const maxLineLen = 1024

// maxSubstitutions bounds the parameter substitutions in reading one
// configuration: keepalived loops for ever on "$A=$A" (the value replaces
// the name in place, forever), and multiline definitions that bring
// themselves back grow without end. It leaves room for a few in each line
// ~SEQ, ~LST and multiline definitions may generate (maxGeneratedLines),
// so that a sequence too long is reported as that.
const maxSubstitutions = 10 * maxGeneratedLines

// maxExpansionDepth bounds multiline definitions, ~SEQ and ~LST lines
// expanding each other.
const maxExpansionDepth = 32

type line struct {
	file  string
	num   int
	words []string
}

// reader holds what keepalived carries from line to line: the config id
// conditional lines compare against, and the definitions so far.
type reader struct {
	configID string
	defs     map[string]*definition
	open     *definition // the multiline definition a trailing backslash continues
	out      []line
	// substitutions made so far, bounded by maxSubstitutions.
	substitutions int
	// lines ~SEQ, ~LST and multiline definitions generated so far,
	// bounded by maxGeneratedLines.
	generated int
	// well-formed ~SEQ and ~LST lines read, and where the first malformed
	// ~LST is, if any (checkLstCount).
	generators   int
	malformedLst string
}

type definition struct {
	value     string // a multiline definition's lines, each ended by "\n" but the last
	multiline bool
	// builtin computes a pre-defined parameter's value in the file that
	// uses it; nil once redefined.
	builtin func(file string) string
}

// readLines returns the statements of the keepalived configuration at
// path as keepalived with config id id reads it, includes expanded in
// place, each "{" and "}" outside quotes a statement of its own.
func readLines(path, id string) ([]line, error) {
	r := &reader{configID: id, defs: map[string]*definition{
		"_PWD":      {builtin: pwd},
		"_INSTANCE": {value: id},
		"_HASH":     {value: "#"},
		"_BANG":     {value: "!"},
	}}
	if err := r.readFile(path, 0); err != nil {
		return nil, err
	}
	if err := r.checkLstCount(); err != nil {
		return nil, err
	}
	return r.out, nil
}

// defaultConfigID is keepalived's config id without -i, which conditional
// lines (@id) compare against: the host name up to its first dot.
func defaultConfigID() string {
	host, _ := os.Hostname()
	id, _, _ := strings.Cut(host, ".")
	return id
}

// pwd is ${_PWD}: keepalived changes to the directory of each file it
// reads.
func pwd(file string) string {
	dir, err := filepath.Abs(filepath.Dir(file))
	if err != nil {
		return filepath.Dir(file)
	}
	return dir
}

func (r *reader) readFile(path string, depth int) error {
	if depth > maxIncludeDepth {
		return fmt.Errorf("keepalived config %s: includes nested deeper than %d (a loop?)", path, maxIncludeDepth)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read keepalived config: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for num := 1; sc.Scan(); num++ {
		for _, piece := range pieces(sc.Text()) {
			if err := r.readLine(path, num, piece, depth); err != nil {
				return fmt.Errorf("%s:%d: %w", path, num, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read keepalived config %s: %w", path, err)
	}
	return nil
}

// pieces is a line as keepalived reads it, with fgets into a buffer of
// 1,024 bytes: a longer line comes in pieces of 1,023 bytes, each read as
// a line of its own (the newline too, when it falls alone), line ends
// (\r, \n) cut from each.
func pieces(text string) []string {
	var out []string
	for rest := text + "\n"; rest != ""; {
		n := min(len(rest), maxLineLen-1)
		out = append(out, strings.TrimRight(rest[:n], "\r\n"))
		rest = rest[n:]
	}
	return out
}

func (r *reader) readLine(path string, num int, raw string, depth int) error {
	if raw == "" {
		r.endDefinition() // an empty line ends a multiline definition
		return nil
	}
	text := decomment(raw)
	if text == "" {
		return nil
	}
	if _, ok := includePattern(text); ok {
		if r.open != nil {
			return errIncludeInDefinition
		}
		return r.include(path, num, text, depth)
	}
	return r.process(path, num, text, 0)
}

// errIncludeInDefinition refuses an include line within a multiline
// definition. keepalived adds it to the definition, but its copy of the
// configuration, which its VRRP and checker processes read, has a blank
// line there, which ends the definition, and the files included where
// keepalived read them, after some line where the definition is used (as
// seen with keepalived 2.2.7).
var errIncludeInDefinition = errors.New("an include line within a multiline definition: keepalived's VRRP and checker processes end the definition there and read the files elsewhere, which vipproxy does not follow; include the files outside the definition")

// include follows an include line as written in the file: keepalived
// substitutes parameters in it before it follows it (read_line calls
// check_include last), and its copy of the configuration, which its VRRP
// and checker processes read, has the files included in place of the
// line. A multiline definition there is refused: keepalived reads its
// other lines, those processes do not (they are not in the copy).
func (r *reader) include(path string, num int, text string, depth int) error {
	text, _, more, err := r.resolve(path, text)
	if err != nil {
		return err
	}
	if len(more) > 0 {
		return fmt.Errorf("%q: a multiline definition in an include line: keepalived reads its other lines, its VRRP and checker processes do not (they read keepalived's copy of the configuration, where the line is left out), which vipproxy does not follow; use a definition of one line", text)
	}
	pattern, ok := includePattern(text)
	if !ok { // substitution left "include" alone, a keyword keepalived reports
		r.add(path, num, text)
		return nil
	}
	return r.readIncludes(path, pattern, depth)
}

func (r *reader) readIncludes(from, pattern string, depth int) error {
	for _, alt := range expandBraces(pattern) {
		if !filepath.IsAbs(alt) {
			alt = filepath.Join(filepath.Dir(from), alt)
		}
		matches, err := filepath.Glob(alt)
		if err != nil {
			return fmt.Errorf("include %s: %w", pattern, err)
		}
		for _, m := range matches { // Glob returns them sorted, as keepalived reads them
			if !configFile(m) {
				continue
			}
			if err := r.readFile(m, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// configFile tells whether keepalived reads a file an include matches: it
// skips directories and what is not a regular, non-executable file
// (check_glob_file, stat following links). A file it cannot stat is left
// to readFile, which reports it.
func configFile(path string) bool {
	fi, err := os.Stat(path)
	return err != nil || fi.Mode().IsRegular() && fi.Mode()&0o111 == 0
}

// includePattern reads "include PATTERN" and its variants includer,
// includem, includew, includeb and includea (which differ only in the
// errors keepalived reports): the pattern is the rest of the line.
func includePattern(text string) (string, bool) {
	rest, ok := strings.CutPrefix(text, "include")
	if !ok || rest == "" {
		return "", false
	}
	if strings.ContainsRune("rmwba", rune(rest[0])) && len(rest) > 1 && isSpace(rest[1]) {
		rest = rest[1:]
	} else if !isSpace(rest[0]) {
		return "", false
	}
	return strings.TrimLeft(rest, " \t"), true
}

// process is keepalived's read_line after a line is read: a conditional
// line is kept or dropped, a definition recorded, parameters substituted
// (the line checked again after each round), the text after a brace read
// again as a line of its own (atBrace), and the lines a ~SEQ, ~LST or
// multiline definition brings read after it.
func (r *reader) process(file string, num int, text string, depth int) error {
	if r.open != nil {
		r.continueDefinition(text)
		return nil
	}
	if depth > maxExpansionDepth {
		return fmt.Errorf("multiline definitions, ~SEQ and ~LST lines expand each other deeper than %d", maxExpansionDepth)
	}
	// The other lines of the multiline definitions substituted in the line
	// and in the text after each of its braces, the latest read first.
	var after [][]string
	for text != "" {
		resolved, generator, more, err := r.resolve(file, text)
		if err != nil {
			return err
		}
		after = append(after, more)
		// keepalived reads the generated lines before the rest of a
		// multiline definition (read_line: seq_list_count >
		// multiline_seq_depth).
		if generator != "" {
			if err := r.generate(file, num, generator, depth); err != nil {
				return err
			}
			break
		}
		if resolved == "" { // dropped, or a definition
			break
		}
		if _, ok := includePattern(resolved); ok {
			return madeInclude(resolved)
		}
		var head string
		head, text = atBrace(resolved)
		r.add(file, num, head)
	}
	for i := len(after) - 1; i >= 0; i-- {
		if err := r.processMore(file, num, after[i], depth); err != nil {
			return err
		}
	}
	return nil
}

// processMore reads the other lines of a multiline definition substituted
// in a line, after it.
func (r *reader) processMore(file string, num int, more []string, depth int) error {
	for _, l := range more {
		if l == "" {
			continue
		}
		if !r.countGenerated() {
			return fmt.Errorf("multiline definitions, with the ~SEQ and ~LST before them, generate over %d lines (vipproxy reads no more)", maxGeneratedLines)
		}
		if err := r.process(file, num, l, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// atBrace splits a line as keepalived does once it has read it (the end
// of read_line): at the first "{" or "}" outside double quotes, a line
// starting with one split after it and the blanks that follow. The text
// after the split is read as the next line, through conditions,
// definitions, ~SEQ, ~LST, substitution and includes again, before
// anything else (line_residue), so "virtual_ipaddress { @id VIP }" holds
// the address only for config id id and drops the "}" otherwise. A quote
// without its pair ends the search: the line is not split.
func atBrace(text string) (head, rest string) {
	at := 0
	if text[0] != '{' && text[0] != '}' {
		if at = braceOutsideQuotes(text); at < 0 {
			return text, ""
		}
	}
	end := at
	if at == 0 {
		end = 1 + spanBlanks(text[1:])
	}
	return strings.TrimRight(text[:end], " \t"), strings.TrimRight(text[end:], " \t")
}

// braceOutsideQuotes is the index of the first "{" or "}" outside double
// quotes in text, -1 if none or a quote is not closed before it.
func braceOutsideQuotes(text string) int {
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '{', '}':
			return i
		case '"':
			end := strings.IndexByte(text[i+1:], '"')
			if end < 0 {
				return -1
			}
			i += end + 1
		}
	}
	return -1
}

func spanBlanks(s string) int { return len(s) - len(trimBlanks(s)) }

// madeInclude refuses an include line that a condition, a substitution,
// a ~SEQ, a ~LST, a multiline definition or the text after a brace makes
// (as in "x { include f"). keepalived follows it, but its copy of the
// configuration, which its VRRP and checker processes read, keeps the
// line as written with the files included after it: those
// processes follow the line again, reading each file twice, the first time
// taking lines that start with "#" or "!" for the copy's own marks (as
// seen with keepalived 2.2.7: an address listed twice, or once after a
// "!" comment; an instance "already defined").
func madeInclude(text string) error {
	return fmt.Errorf("%q is an include made by a condition, a parameter, ~SEQ, ~LST or the text after a brace: keepalived's VRRP and checker processes read the files it includes twice, or in part, which vipproxy does not follow; write the include line plainly, on a line of its own (a file per node: include node-${_INSTANCE}.conf, or a conditional definition used in a plain include line)", text)
}

// resolve is read_line's loop on a line: a condition applied, a definition
// recorded, parameters substituted until the line is stable. It returns the
// line as keepalived reads on with it (empty if dropped or a definition),
// or the ~SEQ or ~LST line it is instead, and the other lines of the
// multiline definitions substituted, to be read after it.
func (r *reader) resolve(file, text string) (string, string, []string, error) {
	var more []string
	for {
		var ok bool
		if text, ok = r.condition(text); !ok {
			return "", "", more, nil
		}
		if r.define(text) {
			return "", "", more, nil
		}
		if strings.HasPrefix(text, "~SEQ") || strings.HasPrefix(text, "~LST") {
			return "", text, more, nil
		}
		if strings.HasPrefix(text, "~") || !strings.Contains(text, "$") {
			return text, "", more, nil
		}
		replaced, extra, changed, err := r.substitute(file, text, maxLineLen)
		if err != nil {
			return "", "", nil, err
		}
		if text = replaced; !changed {
			return text, "", more, nil
		}
		more = append(extra, more...)
		text = decomment(text)
		if !strings.HasPrefix(text, "@") && !strings.Contains(text, "$") {
			return text, "", more, nil
		}
	}
}

// add keeps a statement, if the line holds one.
func (r *reader) add(file string, num int, text string) {
	if ws := words(text); len(ws) > 0 {
		r.out = append(r.out, line{file, num, ws})
	}
}

// condition applies a conditional line: "@id rest" is rest when id is the
// config id, "@^id rest" when it is not; otherwise the line is dropped.
func (r *reader) condition(text string) (string, bool) {
	id, ok := strings.CutPrefix(text, "@")
	if !ok {
		return text, true
	}
	id, negated := strings.CutPrefix(id, "^")
	end := strings.IndexAny(id, " \t")
	if end < 0 {
		return "", false
	}
	if (id[:end] == r.configID) == negated {
		return "", false
	}
	return strings.TrimLeft(id[end:], " \t"), true
}

// define records "$NAME=value" (no space before the "="); a value ending
// in a backslash starts a multiline definition.
func (r *reader) define(text string) bool {
	name, value, ok := strings.Cut(strings.TrimPrefix(text, "$"), "=")
	if !ok || !strings.HasPrefix(text, "$") || !isName(name) {
		return false
	}
	value = strings.TrimLeft(value, " \t")
	d := &definition{value: value}
	if strings.HasSuffix(value, `\`) {
		d.multiline = true
		d.value = strings.TrimRight(strings.TrimSuffix(value, `\`), " \t")
		if d.value != "" {
			d.value += "\n"
		}
		r.open = d
	}
	r.defs[name] = d
	return true
}

// continueDefinition adds a line to the open multiline definition; a line
// without the trailing backslash is its last.
func (r *reader) continueDefinition(text string) {
	d := r.open
	if body, ok := strings.CutSuffix(text, `\`); ok {
		if body = strings.TrimRight(body, " \t"); body != "" {
			d.value += body + "\n"
		}
		return
	}
	r.endDefinition() // whether it is multiline is decided before its last line
	d.value += text
}

func (r *reader) endDefinition() {
	if r.open != nil && r.open.value == "" {
		r.open.multiline = false
	}
	r.open = nil
}

// substitute replaces each defined $NAME (followed by a space, tab, comma,
// ")" or the end of the line) and ${NAME}, scanning on from the start of
// each value as keepalived does (replace_param). A multiline definition is
// substituted only where it ends the line: its first line takes the name's
// place and its other lines are returned, to be read after this one. A
// substitution that would overflow keepalived's buffer, of size bufLen
// (a line's, or add_seq's for the numbers of a ~SEQ), ends the pass as not
// changed, the text as far as it got, its other lines dropped, as there.
func (r *reader) substitute(file, text string, bufLen int) (string, []string, bool, error) {
	// The other lines of each multiline definition substituted, the
	// latest read first (keepalived's multiline_stack); kept in the order
	// substituted, as prepending each made reading quadratic.
	var pending [][]string
	changed := false
	for i := 0; i < len(text); {
		at := strings.IndexByte(text[i:], '$')
		if at < 0 {
			break
		}
		i += at
		ref, d := r.reference(text[i+1:])
		if d == nil {
			i++
			continue
		}
		value := d.value
		if d.builtin != nil {
			value = d.builtin(file)
		}
		var rest []string
		if d.multiline {
			first, after, _ := strings.Cut(value, "\n")
			value, rest = first, strings.Split(after, "\n")
		}
		if len(text)-len(ref)-1+len(value) >= bufLen {
			return text, nil, false, nil
		}
		if r.substitutions++; r.substitutions > maxSubstitutions {
			return "", nil, false, fmt.Errorf("parameter substitution does not end (over %d substitutions; keepalived would not finish reading)", maxSubstitutions)
		}
		pending = append(pending, rest)
		text = text[:i] + value + text[i+1+len(ref):]
		changed = true
		if strings.HasPrefix(strings.TrimLeft(value, " \t"), "~") {
			break
		}
	}
	var more []string
	for i := len(pending) - 1; i >= 0; i-- {
		more = append(more, pending[i]...)
	}
	return text, more, changed, nil
}

// reference reads a parameter reference after a "$": the text it spans
// ("NAME" or "{NAME}") and its definition, nil if it names none that may
// stand there.
func (r *reader) reference(s string) (string, *definition) {
	braced := strings.HasPrefix(s, "{")
	name := strings.TrimPrefix(s, "{")
	end := 0
	for end < len(name) && isNameByte(name[end], end == 0) {
		end++
	}
	if end == 0 {
		return "", nil
	}
	ref, after := name[:end], name[end:]
	if braced {
		if !strings.HasPrefix(after, "}") {
			return "", nil
		}
		ref, after = "{"+ref+"}", after[1:]
	} else if after != "" && !strings.ContainsRune(" \t,)", rune(after[0])) {
		return "", nil
	}
	d := r.defs[name[:end]]
	if d == nil || d.multiline && after != "" {
		return "", nil
	}
	return ref, d
}

func isName(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isNameByte(s[i], i == 0) {
			return false
		}
	}
	return s != ""
}

func isNameByte(c byte, first bool) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || !first && '0' <= c && c <= '9'
}

func isSpace(c byte) bool { return strings.IndexByte(" \t\f\n\r\v", c) >= 0 }

// decomment is keepalived's: leading and trailing blanks go, a comment
// starts at the first # or ! outside double quotes, \# and \! outside
// quotes stand for the characters themselves, and a final backslash (the
// continuation of a multiline definition) is kept, even after a comment.
func decomment(s string) string {
	s = strings.TrimLeft(s, " \t")
	var b strings.Builder
	quoted, comment, cont := false, -1, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			if comment < 0 {
				quoted = !quoted
			}
		case c == '\\' && i+1 == len(s):
			cont = true
			continue
		case c == '\\':
			if !quoted && (s[i+1] == '#' || s[i+1] == '!') {
				i++
				c = s[i]
			} else {
				b.WriteByte(c)
				i++
				c = s[i]
			}
		case (c == '#' || c == '!') && !quoted && comment < 0:
			comment = b.Len()
		}
		b.WriteByte(c)
	}
	out := b.String()
	if comment >= 0 {
		out = out[:comment]
	}
	out = strings.TrimRight(out, " \t")
	if cont {
		out += `\`
	}
	return out
}

// words splits a statement as keepalived does (alloc_strvec_r): at
// blanks, a double-quoted string one word without its quotes. Braces are
// nothing special here: atBrace has put each one outside quotes on a line
// of its own.
func words(text string) []string {
	var out []string
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case isSpace(c):
			i++
		case c == '"':
			end := strings.IndexByte(text[i+1:], '"')
			if end < 0 { // keepalived reports the unmatched quote and drops the rest
				return out
			}
			out = append(out, text[i+1:i+1+end])
			i += end + 2
		default:
			end := i
			for end < len(text) && !isSpace(text[end]) && text[end] != '"' {
				end++
			}
			out = append(out, text[i:end])
			i = end
		}
	}
	return out
}

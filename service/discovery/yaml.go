package discovery

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// yamlDoc is a parsed kubeconfig: maps, slices, strings, bools, nil and
// yamlNumber, and the line of every key, so that a value of the wrong
// type is refused by file:line.
type yamlDoc struct {
	root  map[string]any
	lines map[string]int // path of a key ("users[1].user.token") -> its line
	// err is the first refusal of a read (str, boolean, named,
	// dataOrFile): the reads after it go on with zero values, and the
	// caller reports err once it has read what it needs.
	err error
}

// yamlNumber is a plain scalar that YAML reads as a number (or .inf,
// .nan): kubectl refuses it where a string or a boolean goes.
type yamlNumber string

// lineError is a refusal at one line of the file.
type lineError struct {
	line int
	msg  string
}

func (e *lineError) Error() string {
	if e.line == 0 {
		return e.msg
	}
	return fmt.Sprintf("line %d: %s", e.line, e.msg)
}

func errorAt(line int, format string, args ...any) error {
	return &lineError{line: line, msg: fmt.Sprintf(format, args...)}
}

// parseKubeconfig reads the subset of YAML that kubeconfig files use
// (block mappings and sequences, plain and quoted scalars, `{}` and `[]`),
// or JSON. A YAML library would add more to the binary than the rest of
// discovery. Every scalar is typed as kubectl's YAML library (YAML 1.1,
// go-yaml v2 through sigs.k8s.io/yaml) types it; anything outside the
// subset, a second document, a duplicate key is an error naming the line,
// never a guess. FuzzKubeconfigAgainstYAML holds it to that library.
func parseKubeconfig(data []byte) (*yamlDoc, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	doc := &yamlDoc{lines: map[string]int{}}
	for n, raw := range strings.Split(string(data), "\n") {
		if !printable(strings.TrimSuffix(raw, "\r")) {
			return nil, errorAt(n+1, "a character YAML does not allow (not UTF-8, or a control character)")
		}
		if strings.HasPrefix(strings.TrimLeft(raw, " "), "\t") {
			return nil, errorAt(n+1, "tab in indentation")
		}
	}
	if t := bytes.TrimSpace(data); bytes.HasPrefix(t, []byte("{")) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&doc.root); err != nil {
			return nil, fmt.Errorf("JSON: %w", err)
		}
		if _, err := dec.Token(); err != io.EOF {
			return nil, fmt.Errorf("JSON: text after the object")
		}
		doc.root = numbersOf(doc.root).(map[string]any)
		return doc, nil
	}
	lines, err := splitLines(string(data))
	if err != nil {
		return nil, err
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("empty file")
	}
	p := &yamlParser{lines: lines, keyLines: doc.lines}
	if lines[0].indent != 0 || isItem(lines[0].text) {
		return nil, errorAt(lines[0].num, "a kubeconfig is a mapping at the top, starting in column 1")
	}
	if doc.root, err = p.mapping(0, ""); err != nil {
		return nil, err
	}
	if p.i < len(p.lines) {
		return nil, errorAt(p.lines[p.i].num, "unexpected indentation")
	}
	return doc, nil
}

// numbersOf turns the json.Numbers of a JSON kubeconfig into yamlNumbers.
func numbersOf(v any) any {
	switch v := v.(type) {
	case json.Number:
		return yamlNumber(v)
	case map[string]any:
		for k, x := range v {
			v[k] = numbersOf(x)
		}
	case []any:
		for i, x := range v {
			v[i] = numbersOf(x)
		}
	}
	return v
}

type yamlLine struct {
	indent int
	text   string
	num    int
}

// splitLines drops blank and comment lines and refuses what the subset
// does not read: tabs in indentation, directives, a second document.
func splitLines(data string) ([]yamlLine, error) {
	var out []yamlLine
	started := false // a --- was seen
	for n, raw := range strings.Split(data, "\n") {
		num := n + 1
		text := strings.TrimRight(raw, " \r")
		trimmed := strings.TrimLeft(text, " ")
		indent := len(text) - len(trimmed)
		switch {
		case strings.HasPrefix(trimmed, "\t"):
			return nil, errorAt(num, "tab in indentation")
		case trimmed == "" || strings.HasPrefix(trimmed, "#"):
			continue
		case indent == 0 && strings.HasPrefix(trimmed, "%"):
			return nil, errorAt(num, "YAML directives are not supported in a kubeconfig here")
		case indent == 0 && (marker(trimmed, "---") || marker(trimmed, "...")):
			if len(out) > 0 || started || !marker(trimmed, "---") || strings.TrimSpace(strings.TrimPrefix(trimmed, "---")) != "" {
				return nil, errorAt(num, "a second YAML document (or content after ---): a kubeconfig is one document (kubectl would read only the first)")
			}
			started = true
			continue
		}
		out = append(out, yamlLine{indent: indent, text: trimmed, num: num})
	}
	return out, nil
}

// printable says whether every character of a line is one YAML allows
// inside a line.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		// Carriage returns, NEL and U+2028/9 would break the line for YAML.
		ok := r == '\t' || (r >= 0x20 && r <= 0x7e) || (r >= 0xa0 && r <= 0xd7ff && r != 0x2028 && r != 0x2029) ||
			(r >= 0xe000 && r <= 0xfffd && r != 0xfeff) || r >= 0x10000
		if !ok {
			return false
		}
	}
	return true
}

// marker says whether a line is the document marker m, alone or followed
// by a space.
func marker(text, m string) bool {
	return text == m || strings.HasPrefix(text, m+" ") || strings.HasPrefix(text, m+"\t")
}

type yamlParser struct {
	lines    []yamlLine
	i        int
	keyLines map[string]int
}

func isItem(text string) bool { return text == "-" || strings.HasPrefix(text, "- ") }

// node reads the mapping or sequence whose first line is the current one.
func (p *yamlParser) node(indent int, path string) (any, error) {
	if isItem(p.lines[p.i].text) {
		return p.sequence(indent, path)
	}
	return p.mapping(indent, path)
}

func (p *yamlParser) sequence(indent int, path string) ([]any, error) {
	out := []any{}
	for p.i < len(p.lines) && p.lines[p.i].indent == indent && isItem(p.lines[p.i].text) {
		l := p.lines[p.i]
		item := fmt.Sprintf("%s[%d]", path, len(out))
		rest := strings.TrimLeft(strings.TrimPrefix(l.text, "-"), " ")
		var v any
		var err error
		switch {
		case rest == "" || strings.HasPrefix(rest, "#"):
			p.i++
			v, err = p.child(indent, item, false)
		case isItem(rest):
			return nil, errorAt(l.num, "a sequence inside a sequence item on one line is not supported in a kubeconfig here")
		case isKey(rest):
			// "- key: value" opens a mapping at the column of "key".
			p.lines[p.i] = yamlLine{indent: indent + len(l.text) - len(rest), text: rest, num: l.num}
			v, err = p.mapping(p.lines[p.i].indent, item)
		default:
			p.i++
			v, err = scalar(rest, l.num)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (p *yamlParser) mapping(indent int, path string) (map[string]any, error) {
	out := map[string]any{}
	for p.i < len(p.lines) && p.lines[p.i].indent == indent && !isItem(p.lines[p.i].text) {
		l := p.lines[p.i]
		key, rest, err := splitKey(l.text, l.num)
		if err != nil {
			return nil, err
		}
		if _, dup := out[key]; dup {
			return nil, errorAt(l.num, "key %q appears twice in one mapping", key)
		}
		p.i++
		var v any
		if rest == "" {
			v, err = p.child(indent, path+"."+key, true)
		} else {
			v, err = scalar(rest, l.num)
		}
		if err != nil {
			return nil, err
		}
		out[key] = v
		p.keyLines[strings.TrimPrefix(path+"."+key, ".")] = l.num
	}
	return out, nil
}

// child reads the block under a key or item that has no value on its
// line: deeper lines, or (under a key) a sequence at the same
// indentation; else null.
func (p *yamlParser) child(indent int, path string, underKey bool) (any, error) {
	if p.i >= len(p.lines) {
		return nil, nil
	}
	next := p.lines[p.i]
	if next.indent > indent || (underKey && next.indent == indent && isItem(next.text)) {
		return p.node(next.indent, path)
	}
	return nil, nil
}

func isKey(text string) bool {
	_, _, err := splitKey(text, 0)
	return err == nil
}

// splitKey splits "key: value", "key:" or a quoted key, and drops a
// comment after the colon. A plain key YAML reads as anything but a
// string (true, 1, null) is refused: kubectl would see another key.
func splitKey(text string, line int) (key, rest string, err error) {
	tooLong := func() error {
		return errorAt(line, "a key longer than %d characters (YAML's bound on a simple key)", maxKey)
	}
	if text[0] == '"' || text[0] == '\'' {
		k, after, err := quoted(text, line)
		if err != nil {
			return "", "", err
		}
		if after != ":" && !strings.HasPrefix(after, ": ") {
			return "", "", errorAt(line, "expected `key: value`")
		}
		if len(text)-len(after) > maxKey {
			return "", "", tooLong()
		}
		return k, valuePart(after[1:]), nil
	}
	// The key ends at the first ": " (a colon inside it, "a:b", is its
	// own), so that is where YAML's bound is counted.
	i := strings.Index(text+" ", ": ")
	if i > maxKey || (i < 0 && len(text) > maxKey) {
		return "", "", tooLong()
	}
	if i <= 0 || strings.ContainsAny(text[:i], "\t#") || strings.ContainsRune(indicators, rune(text[0])) {
		return "", "", errorAt(line, "expected `key: value`")
	}
	key = strings.TrimRight(text[:i], " ")
	if v, _ := plain(key, line); v != key {
		return "", "", errorAt(line, "key %q is not a string in YAML: quote it", key)
	}
	return key, valuePart(text[min(i+1, len(text)):]), nil
}

// maxKey bounds a key: YAML ends a simple key within 1024 characters.
const maxKey = 1000

// valuePart is what follows a key's colon, without a comment.
func valuePart(s string) string {
	s = strings.TrimLeft(s, " ")
	if strings.HasPrefix(s, "#") {
		return ""
	}
	return s
}

// indicators may not start a plain scalar or key.
const indicators = "-?:,[]{}#&*!|>'\"%@`"

// scalar reads a value on a key's or item's line: a quoted or plain
// scalar, or an empty flow collection, with an optional comment.
func scalar(s string, line int) (any, error) {
	switch {
	case s[0] == '"' || s[0] == '\'':
		v, after, err := quoted(s, line)
		if err != nil {
			return nil, err
		}
		if rest := strings.TrimLeft(after, " "); rest != "" && (rest == after || rest[0] != '#') {
			return nil, errorAt(line, "text after a quoted string")
		}
		return v, nil
	case s == "{}" || strings.HasPrefix(s, "{} #"):
		return map[string]any{}, nil
	case s == "[]" || strings.HasPrefix(s, "[] #"):
		return []any{}, nil
	case strings.ContainsRune(indicators, rune(s[0])) && s[0] != '-' && s[0] != '?' && s[0] != ':':
		return nil, errorAt(line, "YAML block scalars, flow collections, anchors, aliases and tags are not supported in a kubeconfig here")
	case s == "-" || s == "?" || s == ":" || strings.HasPrefix(s, "- ") || strings.HasPrefix(s, "? ") || strings.HasPrefix(s, ": "):
		return nil, errorAt(line, "%q does not start a value", s[:1])
	}
	if i := strings.Index(s, " #"); i >= 0 {
		s = strings.TrimRight(s[:i], " ")
	}
	if strings.Contains(s, ": ") || strings.HasSuffix(s, ":") || strings.ContainsRune(s, '\t') {
		return nil, errorAt(line, "a plain value with `: `, a final `:` or a tab: quote it")
	}
	return plain(s, line)
}

// isYAMLFloat matches go-yaml v2's float syntax,
// ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$, without regexp
// (which would add 0.3 MB to the binary).
func isYAMLFloat(s string) bool {
	s = strings.TrimLeft(s[:min(1, len(s))], "+-") + s[min(1, len(s)):]
	mant, exp, hasExp := strings.Cut(strings.ReplaceAll(s, "E", "e"), "e")
	whole, frac, hasDot := strings.Cut(mant, ".")
	if !digits(frac) || !digits(whole) || (whole == "" && (!hasDot || frac == "")) {
		return false
	}
	if hasExp {
		exp = strings.TrimLeft(exp[:min(1, len(exp))], "+-") + exp[min(1, len(exp)):]
		return exp != "" && digits(exp)
	}
	return true
}

func digits(s string) bool {
	return strings.Trim(s, "0123456789") == ""
}

// plain types a plain scalar as YAML 1.1 does (go-yaml v2's resolve):
// null, a boolean (yes/no/on/off/y/n too), a number, else a string.
func plain(s string, line int) (any, error) {
	switch s {
	case "", "~", "null", "Null", "NULL":
		return nil, nil
	case "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON":
		return true, nil
	case "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF":
		return false, nil
	case ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF":
		return yamlNumber(s), nil
	case "<<":
		return nil, errorAt(line, "YAML merge keys are not supported in a kubeconfig here")
	}
	if !strings.ContainsRune("+-.0123456789", rune(s[0])) {
		return s, nil
	}
	if s[0] == '.' {
		// go-yaml reads these with ParseFloat as written: an underscore
		// (".0_", "._5") leaves a string.
		if isFloat(s) {
			return yamlNumber(s), nil
		}
		return s, nil
	}
	n := strings.ReplaceAll(s, "_", "")
	if _, err := strconv.ParseInt(n, 0, 64); err == nil {
		return yamlNumber(s), nil
	}
	if _, err := strconv.ParseUint(n, 0, 64); err == nil {
		return yamlNumber(s), nil
	}
	if isYAMLFloat(n) && isFloat(n) {
		return yamlNumber(s), nil
	}
	if b, ok := strings.CutPrefix(strings.TrimPrefix(n, "-"), "0b"); ok && isBinary(b) {
		return yamlNumber(s), nil
	}
	return s, nil
}

func isFloat(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

func isBinary(s string) bool {
	_, err := strconv.ParseUint(s, 2, 64)
	return err == nil
}

// quoted reads a single- or double-quoted scalar at the start of s and
// returns it and the text after its closing quote. A quoted scalar that
// goes on to the next line is refused.
func quoted(s string, line int) (string, string, error) {
	if s[0] == '\'' {
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			switch {
			case s[i] == '\'' && i+1 < len(s) && s[i+1] == '\'':
				b.WriteByte('\'')
				i++
			case s[i] == '\'':
				return b.String(), s[i+1:], nil
			default:
				b.WriteByte(s[i])
			}
		}
		return "", "", errorAt(line, "single-quoted string not closed on its line")
	}
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			v, err := unescape(s[1:i])
			if err != nil {
				return "", "", errorAt(line, "double-quoted string: %v", err)
			}
			return v, s[i+1:], nil
		}
	}
	return "", "", errorAt(line, "double-quoted string not closed on its line")
}

// unescape reads YAML's double-quoted escapes that Go's also has; the
// others (\e, \N, \_, \L, \P, \/, \ , line folding) are refused.
func unescape(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteByte(s[i])
		if s[i] != '\\' || i == len(s)-1 {
			continue
		}
		i++
		if strings.IndexByte(`"\\abfnrtvxuU`, s[i]) < 0 {
			return "", fmt.Errorf("escape \\%c is not supported here", s[i])
		}
		if s[i] == 'x' {
			// YAML's \xNN is the character U+00NN (\x80 is "\u0080"),
			// Go's the byte NN.
			b.WriteString("u00")
		} else {
			b.WriteByte(s[i])
		}
	}
	v, err := strconv.Unquote(`"` + b.String() + `"`)
	if err != nil {
		return "", fmt.Errorf("an escape this reader does not support")
	}
	return v, nil
}

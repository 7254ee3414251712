package discovery

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// parseKubeconfig reads the subset of YAML that kubeconfig files use
// (block mappings and sequences, plain and quoted scalars, `{}` and `[]`),
// or JSON, into maps, slices and strings. A YAML library would add more to
// the binary than the rest of discovery; anything outside the subset is an
// error naming the line, never a guess.
func parseKubeconfig(data []byte) (map[string]any, error) {
	if t := strings.TrimSpace(string(data)); strings.HasPrefix(t, "{") {
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("JSON: %w", err)
		}
		return m, nil
	}
	p := &yamlParser{}
	for n, raw := range strings.Split(string(data), "\n") {
		text := strings.TrimRight(raw, " \t\r")
		trimmed := strings.TrimLeft(text, " ")
		if trimmed == "" || strings.HasPrefix(trimmed, "#") || trimmed == "---" {
			continue
		}
		if strings.HasPrefix(trimmed, "\t") {
			return nil, fmt.Errorf("line %d: tab in indentation", n+1)
		}
		p.lines = append(p.lines, yamlLine{indent: len(text) - len(trimmed), text: trimmed, num: n + 1})
	}
	if len(p.lines) == 0 {
		return nil, fmt.Errorf("empty file")
	}
	v, err := p.node(p.lines[0].indent)
	if err != nil {
		return nil, err
	}
	if p.i < len(p.lines) {
		return nil, fmt.Errorf("line %d: unexpected indentation", p.lines[p.i].num)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("not a mapping at the top")
	}
	return m, nil
}

type yamlLine struct {
	indent int
	text   string
	num    int
}

type yamlParser struct {
	lines []yamlLine
	i     int
}

func isItem(text string) bool { return text == "-" || strings.HasPrefix(text, "- ") }

// node reads the mapping or sequence whose first line is the current one.
func (p *yamlParser) node(indent int) (any, error) {
	if isItem(p.lines[p.i].text) {
		return p.sequence(indent)
	}
	return p.mapping(indent)
}

func (p *yamlParser) sequence(indent int) ([]any, error) {
	out := []any{}
	for p.i < len(p.lines) && p.lines[p.i].indent == indent && isItem(p.lines[p.i].text) {
		l := p.lines[p.i]
		rest := strings.TrimLeft(strings.TrimPrefix(l.text, "-"), " ")
		var v any
		var err error
		switch {
		case rest == "":
			p.i++
			v, err = p.child(indent)
		case isKey(rest):
			// "- key: value" opens a mapping at the column of "key".
			p.lines[p.i] = yamlLine{indent: indent + len(l.text) - len(rest), text: rest, num: l.num}
			v, err = p.mapping(p.lines[p.i].indent)
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

func (p *yamlParser) mapping(indent int) (map[string]any, error) {
	out := map[string]any{}
	for p.i < len(p.lines) && p.lines[p.i].indent == indent && !isItem(p.lines[p.i].text) {
		l := p.lines[p.i]
		key, rest, ok := splitKey(l.text)
		if !ok {
			return nil, fmt.Errorf("line %d: expected `key: value`", l.num)
		}
		p.i++
		var v any
		var err error
		if rest == "" {
			v, err = p.child(indent)
		} else {
			v, err = scalar(rest, l.num)
		}
		if err != nil {
			return nil, err
		}
		out[key] = v
	}
	return out, nil
}

// child reads the block under a key or item that has no value on its
// line: deeper lines, or a sequence at the same indentation.
func (p *yamlParser) child(indent int) (any, error) {
	if p.i >= len(p.lines) {
		return nil, nil
	}
	next := p.lines[p.i]
	if next.indent > indent || (next.indent == indent && isItem(next.text)) {
		return p.node(next.indent)
	}
	return nil, nil
}

func isKey(text string) bool {
	_, _, ok := splitKey(text)
	return ok
}

// splitKey splits "key: value" or "key:" outside quotes.
func splitKey(text string) (key, rest string, ok bool) {
	if strings.HasPrefix(text, `"`) || strings.HasPrefix(text, `'`) {
		return "", "", false
	}
	i := strings.Index(text+" ", ": ")
	if i <= 0 {
		return "", "", false
	}
	return text[:i], strings.TrimSpace(text[min(i+2, len(text)):]), true
}

// scalar reads a plain, single- or double-quoted value, or an empty flow
// collection.
func scalar(s string, line int) (any, error) {
	switch {
	case s == "{}":
		return map[string]any{}, nil
	case s == "[]":
		return []any{}, nil
	case strings.HasPrefix(s, `"`):
		end := strings.LastIndex(s, `"`)
		v, err := strconv.Unquote(s[:end+1])
		if end == 0 || err != nil {
			return nil, fmt.Errorf("line %d: bad double-quoted string", line)
		}
		return v, nil
	case strings.HasPrefix(s, `'`):
		end := strings.LastIndex(s, `'`)
		if end == 0 {
			return nil, fmt.Errorf("line %d: bad single-quoted string", line)
		}
		return strings.ReplaceAll(s[1:end], "''", "'"), nil
	case strings.HasPrefix(s, "|") || strings.HasPrefix(s, ">") || strings.HasPrefix(s, "{") ||
		strings.HasPrefix(s, "[") || strings.HasPrefix(s, "&") || strings.HasPrefix(s, "*"):
		return nil, fmt.Errorf("line %d: YAML block scalars, flow collections and anchors are not supported in a kubeconfig here", line)
	}
	if i := strings.Index(s, " #"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	return s, nil
}

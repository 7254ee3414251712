package discovery

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	yamlnodes "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
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

// yamlNumber is a scalar that YAML reads as a number (or .inf, .nan):
// kubectl refuses it where a string or a boolean goes.
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

// parseKubeconfig reads a kubeconfig (YAML or JSON) with kubectl's own
// YAML library, sigs.k8s.io/yaml, so that every value is typed as kubectl
// types it (YAML 1.1: yes is a boolean, 0x1F a number, "true" a string)
// and only the first document is read, as kubectl reads it. A key that
// appears twice in one mapping is refused (which of the two kubectl
// would take is not worth a guess). The lines of the keys come from a
// second reading of the same text, as nodes (keyLines).
func parseKubeconfig(data []byte) (*yamlDoc, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, yamlError(err)
	}
	doc := &yamlDoc{lines: keyLines(data)}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("YAML: %w", err)
	}
	switch r := numbersOf(root).(type) {
	case map[string]any:
		doc.root = r
	case nil:
		return nil, errors.New("empty file")
	default:
		return nil, doc.errAt("", "a kubeconfig is a mapping at the top (expected `key: value`), not a YAML %s", typeName(r))
	}
	return doc, nil
}

// goYAMLLine finds the line in go-yaml's errors, which carry it only in
// their text ("yaml: line 16: found character that cannot start any
// token", "line 17: key \"token\" already set in map").
var goYAMLLine = regexp.MustCompile(`line (\d+): (.*)`)

// yamlError is the library's refusal, as a lineError when it names a line.
func yamlError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	if m := goYAMLLine.FindStringSubmatch(msg); m != nil {
		if line, cerr := strconv.Atoi(m[1]); cerr == nil {
			return errorAt(line, "YAML: %s", m[2])
		}
	}
	return errors.New("YAML: " + strings.TrimPrefix(msg, "yaml: "))
}

// numbersOf turns the json.Numbers of the library's JSON into yamlNumbers.
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

// keyLines maps the path of every key and list item of the first
// document ("users[1].user.token", "" for the document itself) to its
// line. Text the node reader refuses gives no lines: errors then name
// the key without one.
func keyLines(data []byte) map[string]int {
	lines := map[string]int{}
	var doc yamlnodes.Node
	if yamlnodes.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return lines
	}
	walkLines(doc.Content[0], "", lines, 0)
	return lines
}

// walkLines records the lines under n at path; depth bounds aliases that
// refer to each other.
func walkLines(n *yamlnodes.Node, path string, lines map[string]int, depth int) {
	if depth > 64 {
		return
	}
	if _, ok := lines[path]; !ok {
		lines[path] = n.Line
	}
	switch n.Kind {
	case yamlnodes.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			if path != "" {
				key = path + "." + key
			}
			lines[key] = n.Content[i].Line
			walkLines(n.Content[i+1], key, lines, depth+1)
		}
	case yamlnodes.SequenceNode:
		for i, item := range n.Content {
			walkLines(item, fmt.Sprintf("%s[%d]", path, i), lines, depth+1)
		}
	case yamlnodes.AliasNode:
		if n.Alias != nil {
			walkLines(n.Alias, path, lines, depth+1)
		}
	}
}

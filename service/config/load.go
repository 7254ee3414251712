package config

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/BurntSushi/toml"
	"github.com/vipproxy/vipproxy/service/regularfile"
)

// Error is a configuration problem: the file, the key (a TOML path such as
// health.interval or backend[1].address) and, where known, the line.
type Error struct {
	File   string
	Key    string
	Line   int
	Reason string
}

func (e *Error) Error() string {
	loc := oneLine(e.File)
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", loc, e.Line)
	}
	if e.Key == "" {
		return fmt.Sprintf("%s: %s", loc, oneLine(e.Reason))
	}
	return fmt.Sprintf("%s: %s: %s", loc, oneLine(e.Key), oneLine(e.Reason))
}

// oneLine writes the control characters of s as Go escapes (\n, \x00):
// an error is one line of `check`'s output and of the journal, and its
// parts can hold what the file held (the TOML parser quotes the bytes it
// stopped at, a quoted key may contain a newline).
func oneLine(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// maxFileSize bounds what Load reads; a config is a few kilobytes.
const maxFileSize = 1 << 20

// Load reads, decodes and validates the file at path, opening the files
// it names that files says (see FilesFor), then resolves the backend names
// that could loop into our own listeners (see checkNames).
func Load(path string, files Files) (*Valid, error) {
	if path == "" {
		// Read as is, it said ": read: no such file or directory".
		return nil, &Error{File: "(empty path)", Reason: "no config file named: give its path (the default is " + DefaultPath + ")"}
	}
	data, err := readSmallFile(path, maxFileSize)
	if err != nil {
		var perr *os.PathError
		if errors.As(err, &perr) {
			err = perr.Err // the path is already in Error.File
		}
		return nil, &Error{File: path, Reason: "read: " + err.Error()}
	}
	cfg, err := parse(path, data, files)
	if err != nil {
		return nil, err
	}
	// Bounded by resolveTimeout; Load has no caller's context to honour.
	if err := cfg.checkNames(context.Background(), systemLookup); err != nil {
		withLine(err, string(data))
		return nil, err
	}
	return cfg, nil
}

// withLine fills in the line of each error's key in src when it is unknown.
func withLine(err error, src string) {
	errs, ok := err.(Errors)
	if !ok {
		var ce *Error
		if !errors.As(err, &ce) {
			return
		}
		errs = Errors{ce}
	}
	for _, ce := range errs {
		if ce.Line == 0 && ce.Key != "" {
			ce.Line = keyLine(src, ce.Key)
		}
	}
	// In the order of the file; those with no line (a default broke a rule) last.
	slices.SortStableFunc(errs, func(a, b *Error) int {
		return cmp.Compare(lineOrLast(a.Line), lineOrLast(b.Line))
	})
}

func lineOrLast(line int) int {
	if line == 0 {
		return math.MaxInt
	}
	return line
}

// Parse decodes data over the defaults as if read from the file name and
// validates it. It resolves no names (see Load). The error is an *Error
// (syntax, type) or Errors (every rule broken). It opens every file the
// config names (AllFiles).
func Parse(name string, data []byte) (*Valid, error) { return parse(name, data, AllFiles) }

func parse(name string, data []byte, files Files) (*Valid, error) {
	if err := checkNesting(name, data); err != nil {
		return nil, err
	}
	src := string(data)
	var tree map[string]any
	if _, err := toml.Decode(src, &tree); err != nil {
		return nil, syntaxError(name, err)
	}
	cfg := Default()
	if err := decodeTree(tree, &cfg); err != nil {
		var errs Errors
		for _, de := range decodeErrors(err) {
			errs = append(errs, &Error{File: name, Key: de.key, Line: keyLine(src, de.key), Reason: de.reason})
		}
		switch len(errs) {
		case 0:
			return nil, &Error{File: name, Reason: err.Error()}
		case 1:
			return nil, errs[0]
		}
		withLine(errs, src) // sorts them by line
		return nil, errs
	}
	cfg.Path = name
	valid, err := ValidateFiles(cfg, files)
	if err != nil {
		withLine(err, src)
		return nil, err
	}
	return valid, nil
}

// decodeTree copies the parsed file over cfg: every table, then the
// [[port]] tables over the decoded [health] (see decodePorts).
func decodeTree(tree map[string]any, cfg *Config) error {
	ports, hasPorts := tree["port"]
	delete(tree, "port")
	vip, _ := tree["vip"].(map[string]any)
	_, vipPortWritten := vip["port"]
	err := decodeTable("", tree, reflect.ValueOf(cfg).Elem())
	if hasPorts {
		err = errors.Join(err, decodePorts(ports, cfg, vipPortWritten))
	}
	return err
}

// syntaxError turns a TOML parse error into an Error with key and line.
func syntaxError(name string, err error) error {
	var perr toml.ParseError
	if errors.As(err, &perr) {
		return &Error{File: name, Key: perr.LastKey, Line: perr.Position.Line, Reason: perr.Message}
	}
	return &Error{File: name, Reason: err.Error()}
}

// Encode writes the effective configuration (defaults filled in) as TOML
// that Parse reads back to the same Config, by this binary or another. It
// leaves out the tables the mode refuses: their defaults are all they can
// hold, and one of them, keepalived.probe_command, names this binary, so
// the file read by a binary elsewhere (an upgrade) would hold a value
// written by hand.
func (c *Config) Encode(w io.Writer) error {
	if c.Path != "" {
		if _, err := fmt.Fprintf(w, "# effective configuration of %s\n", c.Path); err != nil {
			return fmt.Errorf("write config: %w", err)
		}
	}
	if err := toml.NewEncoder(w).Encode(c.without(c.VIP.Mode.refusedTables())); err != nil {
		return fmt.Errorf("encode config: %w", err)
	}
	return nil
}

// without is c as a struct of the same fields and tags, less the tables
// named.
func (c *Config) without(tables []string) any {
	v := reflect.ValueOf(*c)
	var fields []reflect.StructField
	var values []reflect.Value
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if slices.Contains(tables, name) {
			continue
		}
		fields = append(fields, reflect.StructField{Name: f.Name, Type: f.Type, Tag: f.Tag})
		values = append(values, v.Field(i))
	}
	out := reflect.New(reflect.StructOf(fields)).Elem()
	for i, val := range values {
		out.Field(i).Set(val)
	}
	return out.Interface()
}

// readSmallFile reads a regular file of at most limit bytes without
// blocking (see regularfile.Read).
func readSmallFile(path string, limit int64) ([]byte, error) {
	return regularfile.Read(path, limit)
}

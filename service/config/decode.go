package config

import (
	"encoding"
	"fmt"
	"math"
	"net/netip"
	"reflect"
	"sort"
	"strings"
	"time"
)

// The strict decoder. BurntSushi/toml parses the text into a tree of maps;
// this file copies that tree into a Config by the `toml` struct tags. Doing
// the copy ourselves (instead of toml.Decode into the struct) gives every
// error the full key path with array indexes (backend[1].address), exact
// tag matching (no case folding) and one wording for type errors.

var (
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	durationType        = reflect.TypeFor[Duration]()
	addrType            = reflect.TypeFor[netip.Addr]()
)

// decodeError is a decoding problem before the file name and line are known.
type decodeError struct {
	key    string
	reason string
}

func (e *decodeError) Error() string { return e.key + ": " + e.reason }

// decodeValue copies the TOML value v into rv; key is v's path.
func decodeValue(key string, v any, rv reflect.Value) error {
	if rv.CanAddr() && rv.Addr().Type().Implements(textUnmarshalerType) {
		return decodeText(key, v, rv)
	}
	switch rv.Kind() {
	case reflect.Struct:
		table, ok := v.(map[string]any)
		if !ok {
			return typeError(key, v, "a table")
		}
		return decodeTable(key, table, rv)
	case reflect.Slice:
		return decodeSlice(key, v, rv)
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			return typeError(key, v, "a string")
		}
		rv.SetString(s)
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			return typeError(key, v, "a boolean (true or false)")
		}
		rv.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(int64)
		if !ok {
			return typeError(key, v, "an integer")
		}
		if rv.OverflowInt(n) {
			return &decodeError{key, fmt.Sprintf("%d is out of range", n)}
		}
		rv.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(int64)
		if !ok {
			return typeError(key, v, "an integer")
		}
		if n < 0 || rv.OverflowUint(uint64(n)) {
			max := uint64(math.MaxUint64) >> (64 - rv.Type().Bits())
			return &decodeError{key, fmt.Sprintf("%d is out of range (0..%d)", n, max)}
		}
		rv.SetUint(uint64(n))
	case reflect.Float32, reflect.Float64:
		switch n := v.(type) {
		case float64:
			rv.SetFloat(n)
		case int64:
			rv.SetFloat(float64(n))
		default:
			return typeError(key, v, "a number")
		}
	default:
		// A programming error in config.go, not in the file.
		return &decodeError{key, fmt.Sprintf("unsupported Go type %s", rv.Type())}
	}
	return nil
}

// decodeTable copies a TOML table into a struct: unknown keys first (a typo
// is the likeliest cause of any later error), then fields in order.
func decodeTable(key string, table map[string]any, rv reflect.Value) error {
	fields := map[string]int{}
	t := rv.Type()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ",")
		if name != "" && name != "-" && t.Field(i).IsExported() {
			fields[name] = i
		}
	}
	names := make([]string, 0, len(table))
	for name := range table {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, ok := fields[name]; !ok {
			return &decodeError{joinKey(key, name), "unknown key"}
		}
	}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ",")
		v, ok := table[name]
		if !ok || name == "" || name == "-" {
			continue
		}
		if err := decodeValue(joinKey(key, name), v, rv.Field(i)); err != nil {
			return err
		}
	}
	return nil
}

// decodeSlice replaces the slice with the TOML array's elements; an array
// of tables ([[backend]]) arrives as []map[string]any.
func decodeSlice(key string, v any, rv reflect.Value) error {
	var items []any
	switch a := v.(type) {
	case []any:
		items = a
	case []map[string]any:
		for _, m := range a {
			items = append(items, m)
		}
	default:
		if rv.Type().Elem().Kind() == reflect.Struct {
			return typeError(key, v, fmt.Sprintf("an array of tables ([[%s]])", key))
		}
		return typeError(key, v, "an array")
	}
	if len(items) == 0 {
		rv.SetZero() // [] and a left-out key decode the same: nil
		return nil
	}
	out := reflect.MakeSlice(rv.Type(), len(items), len(items))
	for i, item := range items {
		if err := decodeValue(fmt.Sprintf("%s[%d]", key, i), item, out.Index(i)); err != nil {
			return err
		}
	}
	rv.Set(out)
	return nil
}

// decodeText feeds a string to an encoding.TextUnmarshaler (Duration, netip.Addr).
func decodeText(key string, v any, rv reflect.Value) error {
	s, ok := v.(string)
	if !ok {
		return typeError(key, v, "a string")
	}
	if err := rv.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
		switch rv.Type() {
		case durationType:
			return &decodeError{key, fmt.Sprintf("%q is not a duration (write e.g. \"1s\", \"250ms\")", s)}
		case addrType:
			return &decodeError{key, fmt.Sprintf("%q is not an IP address", s)}
		}
		return &decodeError{key, fmt.Sprintf("%q: %v", s, err)}
	}
	return nil
}

func typeError(key string, v any, want string) error {
	return &decodeError{key, fmt.Sprintf("must be %s, not %s", want, tomlTypeName(v))}
}

// tomlTypeName names a decoded TOML value's type as the TOML spec does.
func tomlTypeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case time.Time:
		return "a date-time"
	case map[string]any:
		return "a table"
	case []any, []map[string]any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}

func joinKey(parent, name string) string {
	if needsQuotes(name) {
		name = fmt.Sprintf("%q", name)
	}
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// needsQuotes reports whether name is not a TOML bare key.
func needsQuotes(name string) bool {
	if name == "" {
		return true
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return true
		}
	}
	return false
}

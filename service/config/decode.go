package config

import (
	"encoding"
	"errors"
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
	case reflect.Pointer:
		// An optional key whose absence means something (port.required).
		elem := reflect.New(rv.Type().Elem())
		if err := decodeValue(key, v, elem.Elem()); err != nil {
			return err
		}
		rv.Set(elem)
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
// is the likeliest cause of any later error), then fields in order. It
// goes on after a problem, and returns them all (errors.Join).
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
	var errs []error
	for _, name := range names {
		if _, ok := fields[name]; !ok {
			errs = append(errs, &decodeError{joinKey(key, name), "unknown key" + didYouMean(name, fields)})
		}
	}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ",")
		v, ok := table[name]
		if !ok || name == "" || name == "-" {
			continue
		}
		if err := decodeValue(joinKey(key, name), v, rv.Field(i)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// decodeSlice replaces the slice with the TOML array's elements; an array
// of tables ([[backend]]) arrives as []map[string]any.
func decodeSlice(key string, v any, rv reflect.Value) error {
	items, err := arrayItems(key, v, rv.Type().Elem())
	if err != nil {
		return err
	}
	if len(items) == 0 {
		rv.SetZero() // [] and a left-out key decode the same: nil
		return nil
	}
	out := reflect.MakeSlice(rv.Type(), len(items), len(items))
	var errs []error
	for i, item := range items {
		if err := decodeValue(fmt.Sprintf("%s[%d]", key, i), item, out.Index(i)); err != nil {
			errs = append(errs, err)
		}
	}
	rv.Set(out)
	return errors.Join(errs...)
}

// arrayItems are the elements of the TOML array v at key, whose elements
// should be of Go type elem.
func arrayItems(key string, v any, elem reflect.Type) ([]any, error) {
	switch a := v.(type) {
	case []any:
		return a, nil
	case []map[string]any:
		items := make([]any, len(a))
		for i, m := range a {
			items[i] = m
		}
		return items, nil
	}
	return nil, typeError(key, v, arrayOf(key, elem, v))
}

// decodePorts decodes the [[port]] tables (v; nil when there are none)
// into cfg.Ports, each over a copy of cfg.Health, which is decoded
// already: [port.health] replaces only the keys it sets. Without
// vip.port in the file, vip.port's default does not apply to them.
func decodePorts(v any, cfg *Config, vipPortWritten bool) error {
	if v == nil {
		return nil
	}
	items, err := arrayItems("port", v, reflect.TypeFor[Port]())
	if err != nil {
		return err
	}
	var errs []error
	cfg.Ports = nil
	for i, item := range items {
		p := Port{Health: cfg.Health}
		key := fmt.Sprintf("port[%d]", i)
		if err := decodeValue(key, item, reflect.ValueOf(&p).Elem()); err != nil {
			errs = append(errs, err)
		} else if _, written := item.(map[string]any)["backend_port"]; written && p.BackendPort == 0 {
			// 0 stands for "not written" (the port's own) once decoded.
			errs = append(errs, &decodeError{key: key + ".backend_port", reason: "must be between 1 and 65535 (left out, it is the port's own)"})
		}
		cfg.Ports = append(cfg.Ports, p)
	}
	if len(cfg.Ports) > 0 && !vipPortWritten {
		cfg.VIP.Port = 0
	}
	return errors.Join(errs...)
}

// decodeErrors flattens what decodeTable joined, in order.
func decodeErrors(err error) []*decodeError {
	if de, ok := err.(*decodeError); ok {
		return []*decodeError{de}
	}
	var out []*decodeError
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, decodeErrors(e)...)
		}
	}
	return out
}

// arrayOf names the array a slice field wants, with how to write it when
// a single value stands where the array should: addresses = "192.0.2.10"
// wants ["192.0.2.10"].
func arrayOf(key string, elem reflect.Type, v any) string {
	text := elem.Kind() == reflect.String || reflect.PointerTo(elem).Implements(textUnmarshalerType)
	switch {
	case text:
		if s, ok := v.(string); ok {
			return fmt.Sprintf("an array of strings (write [%q])", s)
		}
		return "an array of strings"
	case elem.Kind() == reflect.Struct:
		return fmt.Sprintf("an array of tables ([[%s]])", key)
	}
	return "an array"
}

// decodeText feeds a string to an encoding.TextUnmarshaler (Duration, netip.Addr).
func decodeText(key string, v any, rv reflect.Value) error {
	s, ok := v.(string)
	if !ok && rv.Type() == durationType {
		return typeError(key, v, "a duration string"+durationHint(v))
	}
	if !ok {
		return typeError(key, v, "a string")
	}
	// netip.Addr reads "" as the zero Addr without an error, which the
	// rules then named "invalid IP" (vip.addresses = [""]).
	if s == "" && rv.Type() == addrType {
		return &decodeError{key, `"" is not an IP address`}
	}
	if err := rv.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
		switch rv.Type() {
		case durationType:
			return &decodeError{key, fmt.Sprintf("%q is not a duration (write e.g. \"1s\", \"250ms\")", s)}
		case addrType:
			return &decodeError{key, fmt.Sprintf("%q is not an IP address", s)}
		}
		if ce, ok := err.(*choiceError); ok {
			return &decodeError{key, ce.msg}
		}
		return &decodeError{key, fmt.Sprintf("%q: %v", s, err)}
	}
	return nil
}

// durationHint suggests the string for a bare number, read as seconds:
// interval = 1 wants "1s".
func durationHint(v any) string {
	var d time.Duration
	switch n := v.(type) {
	case int64:
		if n < 0 || n > int64(maxDuration/time.Second) {
			return ` such as "1s"`
		}
		d = time.Duration(n) * time.Second
	case float64:
		// NaN fails every comparison: it took the path of a number in
		// range and was hinted as "-2562047h47m16.854775808s".
		if math.IsNaN(n) || n < 0 || n > maxDuration.Seconds() {
			return ` such as "1s"`
		}
		d = time.Duration(n * float64(time.Second))
	default:
		return ` such as "1s"`
	}
	return fmt.Sprintf(" (write %q if seconds are meant)", Duration{d}.String())
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

// didYouMean names the known key closest to a mistyped one ([[backends]]
// for [[backend]], intreval for interval), if one is close.
func didYouMean(name string, fields map[string]int) string {
	best, bestDist := "", 3 // more than two edits is another word
	for known := range fields {
		if d := editDistance(strings.ToLower(name), known); d < bestDist || d == bestDist && known < best {
			best, bestDist = known, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// editDistance is the Levenshtein distance of two short keys.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

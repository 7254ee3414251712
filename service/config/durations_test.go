package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// Every duration key of every table has its range in durationRanges, and
// the table holds no key that does not exist.
func TestEveryDurationHasARange(t *testing.T) {
	durationType := reflect.TypeOf(Duration{})
	found := map[string]bool{}
	ct := reflect.TypeOf(Config{})
	for i := range ct.NumField() {
		table := ct.Field(i)
		name, _, _ := strings.Cut(table.Tag.Get("toml"), ",")
		if table.Type.Kind() != reflect.Struct || name == "" {
			continue
		}
		for j := range table.Type.NumField() {
			f := table.Type.Field(j)
			key, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if f.Type != durationType {
				continue
			}
			found[name+"."+key] = true
			if _, ok := durationRanges[name+"."+key]; !ok {
				t.Errorf("%s.%s has no range in durationRanges", name, key)
			}
		}
	}
	for key := range durationRanges {
		if !found[key] {
			t.Errorf("durationRanges has %s, which is no duration key", key)
		}
	}
}

// Each range is enforced at its bounds, by the one rule for every key.
func TestDurationRanges(t *testing.T) {
	for key, r := range durationRanges {
		for _, c := range []struct {
			d    time.Duration
			want string
		}{
			{r.min, ""},
			{r.max, ""},
			{r.max + 1, "longer than the maximum"},
			{r.min - 1, belowMin(r)},
		} {
			v := &validator{c: &Config{}}
			v.duration(key, key, Duration{c.d})
			got := ""
			if len(v.errs) > 0 {
				got = v.errs[0].Error()
			}
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Errorf("%s = %s: %q, want %q", key, c.d, got, c.want)
			}
		}
	}
}

// belowMin is what a duration just below r.min is told.
func belowMin(r durationRange) string {
	switch r.min {
	case 0:
		return "is negative"
	case positive:
		return "must be positive"
	}
	return "shorter than the minimum"
}

package main

import (
	"bytes"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/service/config"
)

// configKeys are the keys a config file may set, read from the type the
// file is decoded into: "vip.port", "backend.address" ([[backend]]),
// "bgp.peers.name".
func configKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" {
			continue
		}
		key, ft := prefix+name, f.Type
		if ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() == t.PkgPath() {
			keys = append(keys, configKeys(ft, key+".")...)
		} else {
			keys = append(keys, key)
		}
	}
	return keys
}

var (
	tagRE  = regexp.MustCompile(`(?m)^\.TP\n(.*)$`)
	spanRE = regexp.MustCompile(`\\fB(.*?)\\fR`)
)

// TestConfigPageHasEveryKey: vipproxy.toml(5), made from
// docs/configuration.md, describes every key the config file takes (a key
// of a table it describes as a whole, [port.health] or bgp.peers, counts).
func TestConfigPageHasEveryKey(t *testing.T) {
	md, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	writeConfigPage(&page, string(md), "test")
	documented := map[string]bool{}
	for _, tag := range tagRE.FindAllStringSubmatch(page.String(), -1) {
		table := ""
		for _, span := range spanRE.FindAllStringSubmatch(tag[1], -1) {
			key := strings.ReplaceAll(span[1], `\-`, "-")
			if arr, field, ok := strings.Cut(key, "]] "); ok { // [[port]] name
				key = strings.TrimPrefix(arr, "[[") + "." + field
			}
			key = strings.Trim(key, "[]") // [port.health]
			if i := strings.LastIndex(key, "."); i >= 0 {
				table = key[:i+1]
			} else {
				key = table + key // health.interval / timeout
			}
			documented[key] = true
		}
	}
	keys := configKeys(reflect.TypeOf(config.Config{}), "")
	if len(keys) < 50 {
		t.Fatalf("only %d keys in config.Config: %v", len(keys), keys)
	}
	for _, key := range keys {
		covered := false
		for k := key; k != "" && !covered; k = k[:max(strings.LastIndex(k, "."), 0)] {
			covered = documented[k]
		}
		if !covered {
			t.Errorf("vipproxy.toml(5) (docs/configuration.md's table) does not describe %s", key)
		}
	}
}

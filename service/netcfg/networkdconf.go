package netcfg

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"
)

// ForeignPolicy is what systemd-networkd does with the routing policy
// rules and routes it did not make, as networkd.conf and its drop-ins
// decide: true deletes them (networkd's default).
type ForeignPolicy struct {
	Rules  bool     // ManageForeignRoutingPolicyRules=
	Routes bool     // ManageForeignRoutes=
	Files  []string // the files read, in the order networkd reads them
}

// networkdConfDirs are where networkd.conf and networkd.conf.d/ are
// looked for, first wins (systemd's conf file precedence: /etc, /run,
// /usr/local/lib, /usr/lib).
var networkdConfDirs = []string{"/etc/systemd", "/run/systemd", "/usr/local/lib/systemd", "/usr/lib/systemd"}

// ReadForeignPolicy reads networkd.conf (the first found) and then every
// networkd.conf.d/*.conf drop-in in the order of their names, a drop-in
// in /etc hiding one of the same name in /run or /usr/lib (an empty file
// or a link to /dev/null masks it), under root. A later setting wins; a
// value networkd cannot read as a boolean is ignored, as networkd does.
func ReadForeignPolicy(root string) (ForeignPolicy, error) {
	p := ForeignPolicy{Rules: true, Routes: true}
	for _, d := range networkdConfDirs {
		main := filepath.Join(rootOr(root), d, "networkd.conf")
		if _, err := os.Stat(main); err == nil {
			p.Files = append(p.Files, main)
			break
		}
	}
	dropIns, err := networkdDropIns(root)
	if err != nil {
		return p, err
	}
	p.Files = append(p.Files, dropIns...)
	for _, f := range p.Files {
		if err := p.read(f); err != nil {
			return p, err
		}
	}
	return p, nil
}

// networkdDropIns lists the networkd.conf drop-ins, in networkd's order.
func networkdDropIns(root string) ([]string, error) {
	return dropIns(root, networkdConfDirs, "networkd.conf.d")
}

// dropIns lists the drop-ins of one file as systemd reads them: sub/*.conf
// under each of dirs (the highest precedence first), by file name, a name
// in a directory of higher precedence hiding the same name in the others
// (an empty file or a link to /dev/null masks it).
func dropIns(root string, dirs []string, sub string) ([]string, error) {
	byName := map[string]string{}
	for _, d := range dirs {
		dir := filepath.Join(rootOr(root), d, sub)
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("list %s: %w", dir, err)
		}
		for _, e := range entries {
			if _, seen := byName[e.Name()]; !seen && strings.HasSuffix(e.Name(), ".conf") {
				byName[e.Name()] = filepath.Join(dir, e.Name())
			}
		}
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, byName[name])
	}
	return out, nil
}

// readOptions reads the settings of one systemd-style file; what says
// whose files they are, for the error.
func readOptions(path, what string) ([]*unit.UnitOption, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	defer f.Close()
	opts, err := unit.DeserializeOptions(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %s: %w", what, path, err)
	}
	return opts, nil
}

// read applies one file's [Network] ManageForeign* settings to p.
func (p *ForeignPolicy) read(path string) error {
	opts, err := readOptions(path, "networkd's settings")
	if err != nil {
		return err
	}
	for _, o := range opts {
		v, ok := systemdBool(o.Value)
		if o.Section != "Network" || !ok {
			continue
		}
		switch o.Name {
		case "ManageForeignRoutingPolicyRules":
			p.Rules = v
		case "ManageForeignRoutes":
			p.Routes = v
		}
	}
	return nil
}

// systemdBool reads a boolean as systemd's parse_boolean does.
func systemdBool(s string) (value, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "yes", "y", "true", "t", "on":
		return true, true
	case "0", "no", "n", "false", "f", "off":
		return false, true
	}
	return false, false
}

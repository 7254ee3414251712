package netcfg

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Sysctl reads and writes net.ipv4.conf.<if>.* through /proc/sys, which
// shows the network namespace of the thread that opens the file.
type Sysctl struct {
	// Dir is the /proc/sys mount; empty means /proc/sys.
	Dir string
	// NS, when open (> 0), is a descriptor of the network namespace to act
	// in; tests use it to run against a private namespace. Zero or
	// negative: the caller's.
	NS int
}

func (s Sysctl) path(iface, name string) string {
	dir := s.Dir
	if dir == "" {
		dir = "/proc/sys"
	}
	return filepath.Join(dir, "net/ipv4/conf", iface, name)
}

// Get returns net.ipv4.conf.<iface>.<name>; fs.ErrNotExist when iface has
// no such entry (the interface does not exist).
func (s Sysctl) Get(iface, name string) (int, error) {
	var v int
	err := s.inNS(func() error {
		data, err := os.ReadFile(s.path(iface, name))
		if err != nil {
			return err
		}
		v, err = strconv.Atoi(strings.TrimSpace(string(data)))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("read net.ipv4.conf.%s.%s: %w", iface, name, err)
	}
	return v, nil
}

// Set writes v to net.ipv4.conf.<iface>.<name>, always: it does not read
// first (setUplinkSysctls does, to report only what it changed).
func (s Sysctl) Set(iface, name string, v int) error {
	err := s.inNS(func() error {
		p := s.path(iface, name)
		if _, err := os.Stat(filepath.Dir(p)); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("interface %s does not exist", iface)
		}
		return os.WriteFile(p, []byte(strconv.Itoa(v)+"\n"), 0o644)
	})
	if err != nil {
		return fmt.Errorf("set net.ipv4.conf.%s.%s=%d: %w", iface, name, v, err)
	}
	return nil
}

// inNS runs fn in the namespace s.NS, or here if none is set.
func (s Sysctl) inNS(fn func() error) error {
	if s.NS <= 0 {
		return fn()
	}
	return InNetNS(s.NS, fn)
}

// Names lists the entries of net.ipv4.conf: every interface, all and
// default.
func (s Sysctl) Names() ([]string, error) {
	var names []string
	err := s.inNS(func() error {
		entries, err := os.ReadDir(filepath.Dir(filepath.Dir(s.path("x", "y"))))
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list net.ipv4.conf: %w", err)
	}
	return names, nil
}

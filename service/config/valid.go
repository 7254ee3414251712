package config

import (
	"net/netip"
	"slices"
	"strings"
)

// Valid is a Config that passed Validate, the only form the renderers
// (netcfg, keepalived, units) and the daemon take: they do not check it
// again, so `vipproxy check` passes exactly what they accept. Its fields are
// the Config's (cfg.VIP, cfg.Backends ...). Outside this package a Valid
// comes only from Validate, Parse or Load; its fields are not to be changed.
type Valid struct {
	fields
}

// Config returns a copy of the configuration, to change and validate again.
func (v *Valid) Config() Config { return v.fields }

// fields names Config for the embedding: an unexported field name keeps
// Valid from being built out of any Config without validation.
type fields = Config

// Errors are every problem Validate found, in the order of the file.
type Errors []*Error

func (e Errors) Error() string {
	lines := make([]string, len(e))
	for i, err := range e {
		lines[i] = err.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find the first *Error.
func (e Errors) Unwrap() []error {
	out := make([]error, len(e))
	for i, err := range e {
		out[i] = err
	}
	return out
}

// Validate is the one place that decides whether a configuration is
// valid. It takes two visible steps on a copy of c: deriveDefaults fills
// the defaults that depend on other keys, then every rule runs and every
// problem is returned, as Errors. It opens every file c names (AllFiles).
func Validate(c Config) (*Valid, error) { return ValidateFiles(c, AllFiles) }

// ValidateFiles is Validate opening the files that files says (see FilesFor).
func ValidateFiles(c Config, files Files) (*Valid, error) {
	c.deriveDefaults()
	v := &validator{c: &c, files: files}
	for _, rule := range v.rules() {
		rule()
	}
	if len(v.errs) > 0 {
		return nil, v.errs
	}
	return &Valid{c}, nil
}

// deriveDefaults fills the defaults that depend on other keys: a backend's
// name is its address, the VRRP interface is the first uplink, or lo when
// every VIP is a loopback address (tests, the demo: such a VIP never
// leaves the host). It copies the slices it changes, so the caller's
// Config is left alone.
func (c *Config) deriveDefaults() {
	c.derivePortDefaults()
	c.deriveBGPDefaults()
	c.Backends = slices.Clone(c.Backends)
	for i := range c.Backends {
		if c.Backends[i].Name == "" {
			c.Backends[i].Name = c.Backends[i].Address
		}
	}
	switch {
	case c.Keepalived.Interface != "" || c.VIP.Mode.UsesBGP():
		// set, or not read (and a derived value would read as written)
	case len(c.Network.Uplinks) > 0:
		c.Keepalived.Interface = c.Network.Uplinks[0]
	case len(c.VIP.Addresses) > 0 && !slices.ContainsFunc(c.VIP.Addresses, func(a netip.Addr) bool { return !a.IsLoopback() }):
		c.Keepalived.Interface = "lo"
	}
}

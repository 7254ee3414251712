package config

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
)

// Every value vipproxy writes into another program's file (keepalived.conf,
// BIRD's include file, systemd drop-ins, networkd files, the sysctl.d file)
// or uses as a path has one of the field types below, each a whitelist
// decided here. renderedFields lists every such value with its key, so
// `check` refuses at file:line:key whatever would end, extend or break the
// file it lands in: a newline and a brace in a keepalived unicast peer
// wrote a root notify_master into the VRRP instance.

// fieldType is what one kind of value may be: problem says why a value is
// not one, "" when it is.
type fieldType struct {
	problem func(string) string
	// named: the reason names the value itself (checkInterfaceName's).
	named bool
}

// maxPath is the kernel's PATH_MAX (4096, with the terminating NUL).
const maxPath = 4095

// maxFileName is the kernel's NAME_MAX.
const maxFileName = 255

// maxScriptLine is the longest line keepalived reads whole: its parser
// reads the config with a 1024-byte buffer (MAXBUF in keepalived's
// lib/parser.h). Measured with keepalived 2.2.7 on 2026-12-06: a script
// line of 1023 bytes passes --config-test; at 1024 the line is cut, the
// quote is left unterminated, and keepalived crashed (SIGSEGV).
const maxScriptLine = 1023

// maxKeepalivedName bounds the instance name, which keepalived's log lines
// and vrrp_script name (NAME_probe) carry: far under its line limit.
const maxKeepalivedName = 64

// ScriptLine is the line of the vrrp_script that runs the probe, as
// service/keepalived writes it; keepalived bounds its length
// (maxScriptLine).
func (c *Valid) ScriptLine() string { return `    script "` + c.ProbeScript() + `"` }

var (
	ifNameField = fieldType{problem: func(s string) string { return errText(checkInterfaceName(s)) }, named: true}
	// unixListenField is admin.listen's "unix:/path".
	unixListenField = fieldType{problem: func(s string) string { return absPathField("").problem(strings.TrimPrefix(s, "unix:")) }}
	// addrField is an IP address without a zone: neither keepalived nor
	// BIRD nor systemd takes the zone where vipproxy writes an address,
	// and netip.ParseAddr accepts any text after "%", newlines and braces
	// included.
	addrField           = fieldType{problem: addrProblem}
	keepalivedNameField = fieldType{problem: func(s string) string {
		if keepalivedWord(s) && len(s) <= maxKeepalivedName {
			return ""
		}
		return fmt.Sprintf("must be one word of letters, digits, _ . : -, at most %d characters", maxKeepalivedName)
	}}
	portNameField = fieldType{problem: portNameProblem}
	peerNameField = fieldType{problem: func(s string) string {
		if isPeerName(s) {
			return ""
		}
		return fmt.Sprintf("must be [a-z][a-z0-9_]*, at most %d characters (it names the BIRD protocol vipproxy_NAME)", maxPeerName)
	}}
	communityField = fieldType{problem: func(s string) string {
		if isCommunity(s) {
			return ""
		}
		return "is neither ASN:VALUE (each 0..65535) nor a large community ASN:X:Y (each 0..4294967295)"
	}}
	probeCommandField = fieldType{problem: probeCommandProblem}
	// vrrpPassField is keepalived's auth_pass, one word of its line:
	// printable ASCII without blanks, quotes, backslashes, comment (# !)
	// or block ({ }) characters.
	vrrpPassField = secretField("\"'\\#!{}", "spaces, quotes, backslashes, # ! { or }")
	// md5KeyField is a BGP peer's password, written between double quotes
	// in BIRD's file.
	md5KeyField = secretField("\"\\", "spaces, double quotes or backslashes")
)

// secretField is a password of printable ASCII without blanks or the
// characters in refused.
func secretField(refused, says string) fieldType {
	return fieldType{problem: func(s string) string {
		if strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r > '~' }) || strings.ContainsAny(s, refused) {
			return "must be printable ASCII without " + says
		}
		return ""
	}}
}

// absPathField is an absolute path ending in suffix (any when "").
func absPathField(suffix string) fieldType {
	return fieldType{problem: func(s string) string {
		switch {
		case !filepath.IsAbs(s):
			return "is not an absolute path"
		case len(s) > maxPath:
			return fmt.Sprintf("is longer than %d bytes (PATH_MAX)", maxPath)
		case strings.ContainsFunc(s, isControl):
			return "holds a control character (a NUL, newline or tab): no program reads such a path back"
		case slices.ContainsFunc(strings.Split(s, "/"), func(name string) bool { return len(name) > maxFileName }):
			return fmt.Sprintf("has a file name longer than %d bytes (NAME_MAX)", maxFileName)
		case suffix != "" && (!strings.HasSuffix(s, suffix) || strings.HasSuffix(s, "/"+suffix)):
			return "must end in a file name with " + suffix
		}
		return ""
	}}
}

// fileNameField is a bare file name ending in suffix.
func fileNameField(suffix string) fieldType {
	return fieldType{problem: func(s string) string {
		switch {
		case s == "" || s == suffix || strings.Contains(s, "/") || !strings.HasSuffix(s, suffix):
			return fmt.Sprintf("must be a file name (no /) ending in %s", suffix)
		case len(s) > maxFileName:
			return fmt.Sprintf("is longer than %d bytes (NAME_MAX)", maxFileName)
		case strings.ContainsFunc(s, isControl):
			return "holds a control character (a NUL, newline or tab)"
		}
		return ""
	}}
}

func addrProblem(s string) string {
	ip, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return "is not an IP address"
	case ip.Zone() != "":
		return "has a zone (%...): the address is written into keepalived's, BIRD's or systemd's file, which take none; write it without"
	}
	return ""
}

// probeCommandProblem: keepalived reads the vrrp_script line as one
// double-quoted string with shell-like escapes, split at blanks with single
// quotes grouping. A control character (a NUL), a double quote, a
// backslash or an unmatched single quote made keepalived report an
// unterminated quote and drop the script, so the VIP no longer followed the
// proxy's health; so does a line longer than keepalived reads.
func probeCommandProblem(s string) string {
	switch {
	case strings.TrimSpace(s) == "":
		return "is empty: set it to this binary's path and \" probe\" (the default is that, but this binary's path is unknown or holds a quote, a backslash or a control character, which keepalived's script line cannot carry)"
	case strings.ContainsFunc(s, isControl) || strings.ContainsAny(s, "\"\\"):
		return "must be one line without double quotes, backslashes or control characters (NUL, newline, tab): keepalived would drop the script and stop tracking the proxy"
	case strings.Count(s, "'")%2 != 0:
		return "has an unmatched single quote; keepalived would drop the script and stop tracking the proxy"
	}
	return ""
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// renderedField is one value written into another program's file, with
// the key it is written at and its type.
type renderedField struct {
	key, value string
	typ        fieldType
}

// renderedFields lists every value the renderers (service/keepalived,
// service/bird, service/units, service/netcfg) write and every path vipproxy
// creates, of the tables the mode reads. TestEveryRenderedFieldHasAType
// holds the list to the renderers' inputs.
func (c *Config) renderedFields() []renderedField {
	var fs []renderedField
	add := func(key, value string, typ fieldType) { fs = append(fs, renderedField{key, value, typ}) }
	for i, a := range c.VIP.Addresses {
		add(fmt.Sprintf("vip.addresses[%d]", i), a.String(), addrField)
	}
	for i, p := range c.Ports {
		add(fmt.Sprintf("port[%d].name", i), p.Name, portNameField)
	}
	n := c.Network
	add("network.interface", n.Interface, ifNameField)
	for i, u := range n.Uplinks {
		add(fmt.Sprintf("network.uplinks[%d]", i), u, ifNameField)
	}
	add("network.networkd_dir", n.NetworkdDir, absPathField(""))
	add("network.netdev_file", n.NetdevFile, fileNameField(".netdev"))
	add("network.network_file", n.NetworkFile, fileNameField(".network"))
	add("network.sysctl_file", n.SysctlFile, absPathField(".conf"))
	add("network.socket_dropin", n.SocketDropIn, absPathField(".conf"))
	if strings.HasPrefix(c.Admin.Listen, "unix:") {
		add("admin.listen", c.Admin.Listen, unixListenField)
	}
	if c.Discovery.StateDir != "" {
		add("discovery.state_dir", c.Discovery.StateDir, absPathField(""))
	}
	if c.VIP.Mode.UsesKeepalived() {
		fs = append(fs, c.keepalivedFields()...)
	}
	if c.VIP.Mode.UsesBGP() {
		fs = append(fs, c.bgpFields()...)
	}
	return fs
}

func (c *Config) keepalivedFields() []renderedField {
	k := c.Keepalived
	fs := []renderedField{
		{"keepalived.instance", k.Instance, keepalivedNameField},
		{"keepalived.probe_command", k.ProbeCommand, probeCommandField},
	}
	if k.Interface != "" && !slices.Contains(c.Network.Uplinks, k.Interface) { // an uplink is judged as one
		fs = append(fs, renderedField{"keepalived.interface", k.Interface, ifNameField})
	}
	if k.UnicastSrcIP != "" {
		fs = append(fs, renderedField{"keepalived.unicast_src_ip", k.UnicastSrcIP, addrField})
	}
	for i, p := range k.UnicastPeers {
		fs = append(fs, renderedField{fmt.Sprintf("keepalived.unicast_peers[%d]", i), p, addrField})
	}
	if k.AuthPass != "" {
		fs = append(fs, renderedField{"keepalived.auth_pass", k.AuthPass, vrrpPassField})
	}
	return fs
}

func (c *Config) bgpFields() []renderedField {
	b := c.BGP
	fs := []renderedField{
		{"bgp.interface", b.Interface, ifNameField},
		{"bgp.router_id", b.RouterID, addrField},
	}
	for i, cm := range b.Communities {
		fs = append(fs, renderedField{fmt.Sprintf("bgp.communities[%d]", i), cm, communityField})
	}
	for i, p := range b.Peers {
		key := fmt.Sprintf("bgp.peers[%d]", i)
		fs = append(fs, renderedField{key + ".name", p.Name, peerNameField})
		if p.Address.IsValid() {
			fs = append(fs, renderedField{key + ".address", p.Address.String(), addrField})
		}
		if p.Password != "" {
			fs = append(fs, renderedField{key + ".password", p.Password, md5KeyField})
		}
	}
	return fs
}

// rendered runs last: every value written into another program's file
// has its type, whatever the rules before judged; a key a rule already
// refused is not refused twice.
func (v *validator) rendered() {
	refused := map[string]bool{}
	for _, e := range v.errs {
		refused[e.Key] = true
	}
	for _, f := range v.c.renderedFields() {
		if refused[f.key] {
			continue
		}
		switch why := f.typ.problem(f.value); {
		case why == "":
		case f.typ.named:
			v.bad(f.key, "%s", why)
		default:
			v.bad(f.key, "%q %s", f.value, why)
		}
	}
	if v.c.VIP.Mode.UsesKeepalived() && !refused["keepalived.probe_command"] {
		v.scriptLine()
	}
}

// scriptLine: the vrrp_script line must fit in what keepalived reads as
// one line.
func (v *validator) scriptLine() {
	if probeCommandProblem(v.c.Keepalived.ProbeCommand) != "" {
		return
	}
	// The line holds the config's absolute path, so its length depends
	// on where the file is: the message names the limit, not the length.
	if len((&Valid{*v.c}).ScriptLine()) > maxScriptLine {
		v.bad("keepalived.probe_command", "with the config path, makes keepalived's script line longer than the %d bytes keepalived reads (MAXBUF): it would drop the script; shorten it", maxScriptLine)
	}
}

// RenderedKeys are the keys of cfg whose values are written into another
// program's file or used as a path, each with its field type.
func RenderedKeys(cfg *Valid) []string {
	var keys []string
	for _, f := range cfg.renderedFields() {
		keys = append(keys, f.key)
	}
	return keys
}

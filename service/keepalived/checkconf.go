package keepalived

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/vipproxy/vipproxy/service/config"
)

// Conf is a keepalived configuration as keepalived reads it (read.go).
type Conf struct {
	path  string
	lines []line
}

// Read reads the keepalived configuration at path with its includes, as a
// keepalived started with config id id (-i) reads it; "" is keepalived's
// default id, the host name up to its first dot.
func Read(path, id string) (*Conf, error) {
	if id == "" {
		id = defaultConfigID()
	}
	lines, err := readLines(path, id)
	if err != nil {
		return nil, err
	}
	return &Conf{path: path, lines: lines}, nil
}

// CheckVIPReachable fails on what makes keepalived's node unreachable on
// the VIP or balance it apart from vipproxy: an IPVS virtual_server for
// it, another vrrp_instance holding it, strict mode (CheckVirtualServers,
// CheckOtherHolders, CheckStrict).
func (c *Conf) CheckVIPReachable(cfg *config.Valid) error {
	for _, check := range []func(*config.Valid) error{c.CheckVirtualServers, c.CheckOtherHolders, c.CheckStrict} {
		if err := check(cfg); err != nil {
			return err
		}
	}
	return nil
}

// CheckVirtualServers rejects any virtual_server for a VIP: directly
// (address and any port) or through a virtual_server_group that contains
// it. IPVS must not balance the VIP: vipproxy replaces it, and IPVS
// together with arp_ignore breaks pod hairpin on nodes that are both
// controller and worker.
func (c *Conf) CheckVirtualServers(cfg *config.Valid) error {
	groups := groupMembers(c.lines)
	return c.firstProblem(func(l line, words []string, _ [][]string) *config.Error {
		if len(words) < 2 || words[0] != "virtual_server" {
			return nil
		}
		members := []entry{{l, words[1:]}}
		if words[1] == "group" && len(words) > 2 {
			members = groups[words[2]]
		}
		for _, m := range members {
			if vip, ok := matchVIP(cfg.VIP.Addresses, m.words); ok {
				return &config.Error{File: l.file, Line: l.num, Key: "virtual_server", Reason: fmt.Sprintf(
					"%s balances the VIP %s with IPVS (from %s:%d): vipproxy replaces IPVS for the VIP, and IPVS together with arp_ignore breaks pod -> VIP hairpin on nodes that are both controller and worker; remove it and let vipproxy balance",
					strings.Join(words, " "), vip, m.file, m.num)}
			}
		}
		return nil
	})
}

// entry is a statement of a virtual_server_group: a member.
type entry struct {
	line
	words []string
}

// groupMembers maps each virtual_server_group name to its members: the
// statements in its block. The braces are walk's, as keepalived reads
// them: a brace inside a quoted word is part of the word.
func groupMembers(lines []line) map[string][]entry {
	groups := map[string][]entry{}
	walk(lines, func(l line, words []string, blocks [][]string) {
		if n := len(blocks); n > 0 && len(blocks[n-1]) >= 2 && blocks[n-1][0] == "virtual_server_group" {
			name := blocks[n-1][1]
			groups[name] = append(groups[name], entry{l, words})
		}
	})
	return groups
}

// matchVIP reports whether an address spec ("IP [port]", "IP-last [port]"
// range, "fwmark N" never) names one of the VIPs.
func matchVIP(vips []netip.Addr, words []string) (netip.Addr, bool) {
	if len(words) == 0 || words[0] == "fwmark" || words[0] == "group" {
		return netip.Addr{}, false
	}
	spec := words[0]
	if host, _, ok := strings.Cut(spec, "]:"); ok { // [v6]:port
		spec = strings.TrimPrefix(host, "[")
	}
	first, last, isRange := strings.Cut(spec, "-")
	lo, err := netip.ParseAddr(first)
	if err != nil {
		return netip.Addr{}, false
	}
	for _, vip := range vips {
		if vip == lo || (isRange && inRange(lo, last, vip)) {
			return vip, true
		}
	}
	return netip.Addr{}, false
}

// inRange handles keepalived's "10.0.0.1-10" ranges, where the number after
// the dash replaces the last byte (IPv4) or group (IPv6, hex).
func inRange(lo netip.Addr, last string, vip netip.Addr) bool {
	if lo.Is4() != vip.Is4() {
		return false
	}
	a, b := lo.AsSlice(), vip.AsSlice()
	if lo.Is4() {
		end, err := strconv.ParseUint(last, 10, 8)
		return err == nil && bytes.Equal(a[:3], b[:3]) && b[3] >= a[3] && uint64(b[3]) <= end
	}
	end, err := strconv.ParseUint(last, 16, 16)
	group := func(s []byte) uint64 { return uint64(s[14])<<8 | uint64(s[15]) }
	return err == nil && bytes.Equal(a[:14], b[:14]) && group(b) >= group(a) && group(b) <= end
}

// CheckTracksProbe reports whether the keepalived configuration at path
// (with its includes) declares the vrrp_script that runs the probe and a
// track_script naming it: without them keepalived holds the VIP whatever
// the local proxy's state, or (Debian: no include of conf.d) never reads
// vipproxy's instance at all.
func (c *Conf) CheckTracksProbe(cfg *config.Valid) error {
	script := cfg.Keepalived.Instance + "_probe"
	declared := false
	for _, l := range c.lines {
		if len(l.words) >= 2 && l.words[0] == "vrrp_script" && l.words[1] == script {
			declared = true
		}
	}
	if !declared || !trackedScripts(c.lines)[script] {
		// The cause only: the fix depends on how vipproxy was installed
		// (doctor words it for Debian or NixOS).
		return fmt.Errorf("%s (with its includes) has no vrrp_script %s tracked by a vrrp_instance", c.path, script)
	}
	return nil
}

// trackedScripts returns the scripts that track_script blocks name: the
// first word of each entry ("name", "name weight N").
func trackedScripts(lines []line) map[string]bool {
	tracked := map[string]bool{}
	walk(lines, func(_ line, words []string, blocks [][]string) {
		if n := len(blocks); n > 0 && blocks[n-1][0] == "track_script" {
			tracked[words[0]] = true
		}
	})
	return tracked
}

// CheckOtherHolders rejects a vrrp_instance other than vipproxy's that
// lists a VIP among its addresses (an instance left from an earlier
// keepalived setup, say). Each instance has its own router ID and its
// own election, so two of them can make two nodes master at once and put
// the VIP on both.
func (c *Conf) CheckOtherHolders(cfg *config.Valid) error {
	return c.firstProblem(func(l line, words []string, blocks [][]string) *config.Error {
		n := len(blocks)
		if n < 2 || blocks[n-1][0] != "virtual_ipaddress" && blocks[n-1][0] != "virtual_ipaddress_excluded" {
			return nil
		}
		instance := blocks[n-2]
		if instance[0] != "vrrp_instance" || len(instance) < 2 || instance[1] == cfg.Keepalived.Instance {
			return nil
		}
		addr, _, _ := strings.Cut(words[0], "/") // "192.0.2.10/24 dev eth0"
		ip, err := netip.ParseAddr(addr)
		if err != nil || !slices.Contains(cfg.VIP.Addresses, ip.Unmap()) {
			return nil
		}
		return &config.Error{File: l.file, Line: l.num, Key: "vrrp_instance", Reason: fmt.Sprintf(
			"vrrp_instance %s also holds the VIP %s: it is elected apart from vipproxy's instance %s, so two nodes can hold the VIP at once; remove it from %s",
			instance[1], ip.Unmap(), cfg.Keepalived.Instance, instance[1])}
	})
}

// CheckStrict rejects the settings that make keepalived drop every packet
// to and from the VIP on the master: vrrp_strict in global_defs, or
// strict_mode or no_accept in vipproxy's vrrp_instance. RFC 5798 has a
// master that does not own the address refuse its packets, keepalived
// enforces that with a firewall drop rule (its nftables table
// "keepalived") and, under vrrp_strict with VRRPv2, resets an instance's
// accept: nothing reaches the proxy on the VIP. keepalived's own sample
// configuration sets vrrp_strict.
func (c *Conf) CheckStrict(cfg *config.Valid) error {
	return c.firstProblem(func(l line, words []string, blocks [][]string) *config.Error {
		n := len(blocks)
		if n == 0 {
			return nil
		}
		in := blocks[n-1]
		var what string
		switch {
		case in[0] == "global_defs" && words[0] == "vrrp_strict":
			what = "vrrp_strict in global_defs"
		case in[0] != "vrrp_instance" || len(in) < 2 || in[1] != cfg.Keepalived.Instance:
			return nil
		case words[0] == "no_accept":
			what = "no_accept in vrrp_instance " + in[1]
		case words[0] == "strict_mode" && (len(words) == 1 || !slices.Contains([]string{"off", "false", "no", "0"}, strings.ToLower(words[1]))):
			what = "strict_mode in vrrp_instance " + in[1]
		default:
			return nil
		}
		return &config.Error{File: l.file, Line: l.num, Key: words[0], Reason: what +
			": on the master keepalived drops every packet to and from the VIP (a firewall drop rule, RFC 5798's Accept_Mode), so nothing reaches vipproxy there; remove it"}
	})
}

// firstProblem returns the first problem check finds in the statements
// (walk), nil if none.
func (c *Conf) firstProblem(check func(l line, words []string, blocks [][]string) *config.Error) error {
	var found *config.Error
	walk(c.lines, func(l line, words []string, blocks [][]string) {
		if found == nil {
			found = check(l, words, blocks)
		}
	})
	if found != nil {
		return found
	}
	return nil
}

// walk calls visit with each statement of lines (its words, braces left
// out) and the statements that opened the blocks around it, innermost
// last, wherever keepalived lets the braces sit ("track_script { name }"
// on one line, or "{" on the line after the keyword).
func walk(lines []line, visit func(l line, words []string, blocks [][]string)) {
	var blocks [][]string
	var last []string // the latest statement: a "{" opens its block
	for _, l := range lines {
		var words []string
		end := func() {
			if len(words) > 0 {
				visit(l, words, blocks)
				last, words = words, nil
			}
		}
		for _, w := range l.words {
			switch w {
			case "{":
				end()
				opener := last
				if len(opener) == 0 {
					opener = []string{""} // a brace with no keyword before it
				}
				blocks = append(blocks, opener)
			case "}":
				end()
				if len(blocks) > 0 {
					blocks = blocks[:len(blocks)-1]
				}
			default:
				words = append(words, w)
			}
		}
		end()
	}
}

// maxBraceAlternatives bounds expandBraces: an include line of nested
// alternatives must not cost more than keepalived would ever read.
const maxBraceAlternatives = 1024

// expandBraces writes out the csh-style alternatives of an include pattern
// ("{conf.d,extra}/*.conf"), which keepalived globs with GLOB_BRACE, in the
// order glibc's glob reads them: each alternative of the first brace pair
// in turn, the rest of the pattern expanded after it. As there, a first
// brace without its pair leaves the pattern as it is (Glob reads braces
// literally), and a pair without a comma is its one alternative.
func expandBraces(pattern string) []string {
	var out []string
	expandInto(&out, pattern)
	return out
}

func expandInto(out *[]string, pattern string) {
	open := strings.IndexByte(pattern, '{')
	end, alts := -1, []string(nil)
	if open >= 0 {
		end, alts = alternatives(pattern, open)
	}
	if end < 0 {
		*out = append(*out, pattern)
		return
	}
	for _, alt := range alts {
		if len(*out) == maxBraceAlternatives {
			return
		}
		expandInto(out, pattern[:open]+alt+pattern[end+1:])
	}
}

// alternatives reads the brace pair opening at pattern[open]: the index of
// its closing brace (-1: none) and the alternatives its top-level commas
// separate.
func alternatives(pattern string, open int) (int, []string) {
	depth, start := 0, open+1
	var alts []string
	for i := open; i < len(pattern); i++ {
		switch pattern[i] {
		case '{':
			depth++
		case ',':
			if depth == 1 {
				alts = append(alts, pattern[start:i])
				start = i + 1
			}
		case '}':
			if depth--; depth == 0 {
				return i, append(alts, pattern[start:i])
			}
		}
	}
	return -1, nil
}

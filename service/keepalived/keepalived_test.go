package keepalived

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/internal/testutil/testconfig"
	"github.com/vipproxy/vipproxy/service/config"
)

func selfExe(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

var goldenCases = map[string][]string{
	"minimal": {`[vip]`, `addresses = ["192.168.1.100"]`, `[network]`, `uplinks = ["eth1"]`},
	"unicast-auth": {`[vip]`, `addresses = ["192.168.1.100"]`, `[network]`, `uplinks = ["eth1"]`,
		`[keepalived]`, `state = "MASTER"`, `priority = 150`, `router_id = 7`, `advert_int = 2`,
		`unicast_src_ip = "192.168.1.1"`, `unicast_peers = ["192.168.1.2", "192.168.1.3"]`, `auth_pass = "s3cret"`},
	"dual-stack": {`[vip]`, `addresses = ["192.168.1.100", "2001:db8:1::100"]`, `[network]`, `uplinks = ["eth1", "eth2"]`,
		`[keepalived]`, `interface = "eth2"`, `instance = "cp_vip"`, `probe_command = "/usr/local/bin/vipproxy probe"`},
	"ipv6": {`[vip]`, `addresses = ["2001:db8:1::100"]`, `[network]`, `uplinks = ["eth1"]`},
}

func TestRenderGolden(t *testing.T) {
	for name, lines := range goldenCases {
		t.Run(name, func(t *testing.T) {
			got := Render(testconfig.WithBackend(t, "192.168.1.1:6443", lines...))
			// The default probe_command is this (test) binary's own path.
			got = bytes.ReplaceAll(got, []byte(selfExe(t)+" probe"), []byte("SELF probe"))
			testutil.Golden(t, filepath.Join("testdata/golden", name+".conf"), got)
		})
	}
}

func TestCheckVirtualServers(t *testing.T) {
	cfg := testconfig.WithBackend(t, "192.168.1.1:6443", `[vip]`, `addresses = ["192.168.1.100", "2001:db8:1::100"]`, `[network]`, `uplinks = ["eth1"]`)
	rendered := Render(cfg)
	cases := []struct {
		name  string
		files map[string]string
		want  string // "" means accepted; else a substring of the error
	}{
		{"rendered snippet", map[string]string{"keepalived.conf": string(rendered)}, ""},
		{"virtual_server for the VIP", map[string]string{"keepalived.conf": "global_defs {\n}\n# virtual_server 192.168.1.100 6443 in a comment\nvirtual_server 192.168.1.100 6443 {\n  lb_algo rr\n  real_server 192.168.1.1 6443 {\n  }\n}\n"},
			"keepalived.conf:4: virtual_server: virtual_server 192.168.1.100 6443 balances the VIP 192.168.1.100 with IPVS"},
		{"any port, brace on next line", map[string]string{"keepalived.conf": "virtual_server 192.168.1.100 443\n{\n}\n"}, "VIP 192.168.1.100"},
		{"IPv6 VIP", map[string]string{"keepalived.conf": "virtual_server 2001:db8:1::100 6443 {\n}\n"}, "VIP 2001:db8:1::100"},
		{"other VIP is fine", map[string]string{"keepalived.conf": "virtual_server 192.168.1.200 6443 {\n  real_server 192.168.1.100 6443 {\n  }\n}\n"}, ""},
		{"commented out", map[string]string{"keepalived.conf": "# virtual_server 192.168.1.100 6443 {\n! virtual_server 192.168.1.100 6443 {\n"}, ""},
		{"fwmark is fine", map[string]string{"keepalived.conf": "virtual_server fwmark 1 {\n}\n"}, ""},
		{"group containing the VIP", map[string]string{"keepalived.conf": "virtual_server_group api {\n  192.168.1.50 6443\n  192.168.1.100 6443\n}\nvirtual_server group api {\n}\n"},
			"(from "},
		{"group on one line", map[string]string{"keepalived.conf": "virtual_server_group api { 192.168.1.100 6443 }\nvirtual_server group api {\n}\n"}, "VIP 192.168.1.100"},
		{"group range containing the VIP", map[string]string{"keepalived.conf": "virtual_server_group api {\n  192.168.1.90-110 6443\n}\nvirtual_server group api {\n}\n"}, "VIP 192.168.1.100"},
		{"group range without the VIP", map[string]string{"keepalived.conf": "virtual_server_group api {\n  192.168.1.101-110 6443\n}\nvirtual_server group api {\n}\n"}, ""},
		// A brace inside quotes is part of its word, as keepalived reads it
		// (strcmp against "{" and "}"): the group goes on past that line.
		{"quoted brace in a group", map[string]string{"keepalived.conf": "virtual_server_group api {\n  \"192.168.1.50}\" 6443\n  192.168.1.100 6443\n}\nvirtual_server group api {\n}\n"},
			"VIP 192.168.1.100"},
		{"unused group is fine", map[string]string{"keepalived.conf": "virtual_server_group api {\n  192.168.1.100 6443\n}\n"}, ""},
		{"include relative glob", map[string]string{
			"keepalived.conf":     "global_defs {\n}\ninclude conf.d/*.conf\n",
			"conf.d/10-vrrp.conf": string(rendered),
			"conf.d/20-ipvs.conf": "\n\nvirtual_server 192.168.1.100 6443 {\n}\n",
			"conf.d/ignored.txt":  "virtual_server 192.168.1.100 6443 {\n}\n",
		}, "conf.d/20-ipvs.conf:3: virtual_server"},
		{"include brace alternatives", map[string]string{
			"keepalived.conf":     "include {conf.d,extra}/*.conf\n",
			"conf.d/10-vrrp.conf": string(rendered),
			"extra/20-ipvs.conf":  "\n\nvirtual_server 192.168.1.100 6443 {\n}\n",
		}, "extra/20-ipvs.conf:3: virtual_server"},
		{"include absolute alternative", map[string]string{
			"keepalived.conf":     "include {conf.d/*.conf,TMP/extra/20-ipvs.conf}\n",
			"conf.d/10-vrrp.conf": string(rendered),
			"extra/20-ipvs.conf":  "\n\nvirtual_server 192.168.1.100 6443 {\n}\n",
		}, "extra/20-ipvs.conf:3: virtual_server"},
		{"include loop", map[string]string{"keepalived.conf": "include keepalived.conf\n"}, "nested deeper"},
		{"line past the reader's bound", map[string]string{"keepalived.conf": "global_defs {\n" + strings.Repeat("x", 70000) + "\n}\n"}, "keepalived.conf: bufio.Scanner: token too long"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range c.files {
				testutil.WriteFile(t, dir, name, strings.ReplaceAll(text, "TMP/", dir+"/"))
			}
			err := readAndCheck(cfg, filepath.Join(dir, "keepalived.conf"), (*Conf).CheckVirtualServers)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("rejected: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("got %v, want an error containing %q", err, c.want)
			case c.want != "" && !strings.Contains(c.want, "nested deeper") && !strings.Contains(c.want, "too long") && !strings.Contains(err.Error(), "hairpin"):
				t.Errorf("error does not explain why: %v", err)
			}
		})
	}
}

func TestReadMissingFile(t *testing.T) {
	_, err := Read(filepath.Join(t.TempDir(), "nope.conf"), "")
	if err == nil || !strings.Contains(err.Error(), "nope.conf") {
		t.Errorf("got %v, want an error naming the file", err)
	}
}

// TestExpandBraces: the alternatives of an include pattern in the order
// glibc's glob(GLOB_BRACE) reads them (checked against glibc 2.36 with a
// C program on the same patterns).
func TestExpandBraces(t *testing.T) {
	for _, c := range []struct {
		pattern string
		want    []string
	}{
		{"/a/b.conf", []string{"/a/b.conf"}},
		{"/a/{y,x}.conf", []string{"/a/y.conf", "/a/x.conf"}},
		{"/{a,b}/{x,y}", []string{"/a/x", "/a/y", "/b/x", "/b/y"}},
		{"/{a,{b,c}d}/e", []string{"/a/e", "/bd/e", "/cd/e"}},
		{"/{a}/e", []string{"/a/e"}},
		{"/{a/e", []string{"/{a/e"}},
		{"/{}y", []string{"/y"}},
		{"/{,x}y", []string{"/y", "/xy"}},
	} {
		if got := expandBraces(c.pattern); !slices.Equal(got, c.want) {
			t.Errorf("expandBraces(%q) = %q, want %q", c.pattern, got, c.want)
		}
	}
	if n := len(expandBraces(strings.Repeat("{a,b}", 40))); n != maxBraceAlternatives {
		t.Errorf("2^40 alternatives gave %d patterns, want the bound %d", n, maxBraceAlternatives)
	}
}

// scriptSecurity is the global_defs a keepalived.conf needs to run
// scripts: without it keepalived still runs the probe as root but logs a
// SECURITY VIOLATION, and --config-test fails.
const scriptSecurity = "global_defs {\n    enable_script_security\n    script_user root\n}\n"

// form is a keepalived.conf text, in part, and whether keepalived finds in
// it what a check looks for.
type form struct {
	name  string
	found bool
	text  string
}

// formTable is a table of forms, each made a whole keepalived.conf by
// whole (HOST standing for keepalived's config id, for conditional
// lines). Each table is held twice: check holds a check's verdict to the
// forms, dump holds the forms to keepalived's own configuration dump.
type formTable struct {
	what  string // what keepalived finds in a form, or not
	whole func(text string) string
	forms []form
}

// tracking: vipproxy_probe tracked by vipproxy's instance or not, the
// text being what the vrrp_instance holds besides its addresses.
var tracking = formTable{"vipproxy_probe tracked", trackConf, []form{
	{"block on its own lines", true, "track_script {\n        vipproxy_probe\n    }"},
	{"block on one line", true, "track_script { vipproxy_probe }"},
	{"brace on the next line", true, "track_script\n    {\n        vipproxy_probe\n    }"},
	{"with a weight", true, "track_script {\n        other_probe\n        vipproxy_probe weight 10\n    }"},
	{"not tracked", false, "track_script {\n        other_probe\n    }"},
	{"only in a comment", false, "track_script {\n        other_probe # vipproxy_probe\n    }"},
	{"in another block", false, "track_file {\n        vipproxy_probe\n    }"},
	// As keepalived reads parameters, conditional lines and quotes.
	{"a parameter", true, "$P=vipproxy_probe\n    track_script {\n        $P\n    }"},
	{"a parameter in braces", true, "$P=vipproxy\n    track_script {\n        ${P}_probe\n    }"},
	{"a parameter without braces before text", false, "$P=vipproxy\n    track_script {\n        other_probe\n        $P_probe\n    }"},
	{"a parameter naming another script", false, "$P=other_probe\n    track_script {\n        $P\n    }"},
	{"a parameter redefined", true, "$P=other_probe\n    $P=vipproxy_probe\n    track_script {\n        $P\n    }"},
	{"parameters within parameters", true, "$S=${N}_probe\n    $N=vipproxy\n    track_script {\n        $S\n    }"},
	{"a multiline definition", true, "$TRACK= \\\n    track_script { \\\n        vipproxy_probe \\\n    }\n\n    $TRACK"},
	{"a multiline definition not alone", false, "$TRACK= \\\n    track_script { \\\n        vipproxy_probe \\\n    }\n\n    $TRACK x"},
	{"a line for this host", true, "track_script {\n        @HOST vipproxy_probe\n    }"},
	{"a line for another host", false, "track_script {\n        other_probe\n        @not-HOST vipproxy_probe\n    }"},
	{"a line for every host but this", false, "track_script {\n        other_probe\n        @^HOST vipproxy_probe\n    }"},
	{"a line for every host but another", true, "track_script {\n        @^not-HOST vipproxy_probe\n    }"},
	{"a parameter for this host", true, "@HOST $P=vipproxy_probe\n    @not-HOST $P=other_probe\n    track_script {\n        $P\n    }"},
	{"a quoted name", true, "track_script {\n        \"vipproxy_probe\"\n    }"},
	{"a line for this host after a brace", true, "track_script { @HOST vipproxy_probe }"},
	{"a line for every host but another after a brace", true, "track_script { @^not-HOST vipproxy_probe }"},
	{"a # inside quotes", false, "track_script { other_probe \"#\" }\n    vipproxy_probe"},
}}

// trackConf is a whole keepalived.conf for a tracking form.
func trackConf(track string) string {
	return scriptSecurity + `vrrp_script vipproxy_probe {
    script "/bin/true"
}
vrrp_script other_probe {
    script "/bin/true"
}
vrrp_instance vipproxy {
    state BACKUP
    interface eth1
    virtual_router_id 51
    priority 100
    advert_int 1
    virtual_ipaddress {
        192.168.1.100/32 dev eth1
    }
    ` + strings.ReplaceAll(track, "HOST", defaultConfigID()) + `
}
`
}

func TestCheckTracksProbe(t *testing.T) {
	tracking.check(t, (*Conf).CheckTracksProbe, func(err error) bool { return err == nil })
}

// check holds check's verdict on each form, found or not as found reads
// its error, to the form's.
func (ft formTable) check(t *testing.T, check func(*Conf, *config.Valid) error, found func(error) bool) {
	cfg := testconfig.WithBackend(t, "192.168.1.1:6443", goldenCases["minimal"]...)
	for _, f := range ft.forms {
		t.Run(f.name, func(t *testing.T) {
			text := ft.whole(f.text)
			err := readAndCheck(cfg, testutil.WriteFile(t, t.TempDir(), "keepalived.conf", text), check)
			if found(err) != f.found {
				t.Errorf("check: %v; want %s: %v in:\n%s", err, ft.what, f.found, text)
			}
		})
	}
}

func TestCheckOtherHolders(t *testing.T) {
	cfg := testconfig.WithBackend(t, "192.168.1.1:6443", goldenCases["dual-stack"]...)
	rendered := string(Render(cfg))
	other := func(addresses string) string {
		return "vrrp_instance old_vip {\n    interface eth1\n    virtual_router_id 60\n    " + addresses + "\n}\n"
	}
	cases := []confCase{
		{"vipproxy's own instance", rendered, ""},
		{"another instance with the VIP", rendered + other("virtual_ipaddress {\n        192.168.1.100/24 dev eth1\n    }"),
			"keepalived.conf:34: vrrp_instance: vrrp_instance old_vip also holds the VIP 192.168.1.100"},
		{"on one line", rendered + other("virtual_ipaddress { 192.168.1.100 }"), "old_vip also holds the VIP 192.168.1.100"},
		{"the IPv6 VIP, excluded", rendered + other("virtual_ipaddress_excluded {\n        2001:db8:1::100/128\n    }"),
			"old_vip also holds the VIP 2001:db8:1::100"},
		{"another address", rendered + other("virtual_ipaddress {\n        192.168.1.101/24\n    }"), ""},
		{"the VIP elsewhere in the instance", rendered + other("unicast_peer {\n        192.168.1.100\n    }"), ""},
		{"the VIP in a comment", rendered + other("virtual_ipaddress {\n        # 192.168.1.100\n    }"), ""},
	}
	checkEach(t, (*Conf).CheckOtherHolders, cfg, cases)
}

// holding: an instance old_vip holding 192.168.1.100 or not, as
// keepalived reads parameters, conditional lines and quotes, the text
// being all after global_defs.
var holding = formTable{"192.168.1.100 held by old_vip", holderConf, []form{
	{"the VIP", true, oldVIP("192.168.1.100/24 dev eth1")},
	{"another address", false, oldVIP("192.168.1.101/24 dev eth1")},
	{"a parameter", true, "$VIP=192.168.1.100\n" + oldVIP("${VIP}/24 dev eth1")},
	{"a parameter keepalived leaves as written", false, "$VIP=192.168.1.100\n" + oldVIP("192.168.1.101\n        $VIP/24 dev eth1")},
	{"a parameter defined after its use", false, oldVIP("192.168.1.101\n        ${VIP}") + "$VIP=192.168.1.100\n"},
	{"the instance in a multiline definition", true,
		"$OLD= \\\n" + strings.ReplaceAll(strings.TrimSuffix(oldVIP("${VIP}"), "\n"), "\n", " \\\n") + "\n\n$VIP=192.168.1.100\n$OLD\n"},
	{"a line for this host", true, oldVIP("@HOST 192.168.1.100")},
	{"a line for another host", false, oldVIP("192.168.1.101\n        @not-HOST 192.168.1.100")},
	{"quoted", true, oldVIP(`"192.168.1.100/24"`)},
	{"in a comment", false, oldVIP("192.168.1.101 # 192.168.1.100")},
	{"after an escaped #", false, oldVIP("192.168.1.101\n        \\# 192.168.1.100")},
	// keepalived reads a line in pieces of 1,023 bytes; the line here
	// starts with 8 blanks.
	{"after byte 1,023 of a long line", true, oldVIP("192.168.1.101" + strings.Repeat(" ", 1023-8-13) + "192.168.1.100")},
	{"across byte 1,023 of a long line", false, oldVIP(strings.Repeat(" ", 1023-8-5) + "192.168.1.100")},
}}

// oldVIP is an instance old_vip holding addresses (lines of
// virtual_ipaddress).
func oldVIP(addresses string) string {
	return "vrrp_instance old_vip {\n    state BACKUP\n    interface eth1\n    virtual_router_id 60\n    priority 100\n    advert_int 1\n" +
		"    virtual_ipaddress {\n        " + addresses + "\n    }\n}\n"
}

// holderConf is a whole keepalived.conf for a holding form.
func holderConf(conf string) string {
	return scriptSecurity + strings.ReplaceAll(conf, "HOST", defaultConfigID())
}

func TestCheckOtherHoldersAsKeepalived(t *testing.T) {
	holding.check(t, (*Conf).CheckOtherHolders, func(err error) bool { return err != nil })
}

// generating: an instance old_vip holding 192.168.1.100 or not, its
// addresses, or the instance itself, generated by ~SEQ and ~LST lines.
var generating = formTable{"192.168.1.100 held by old_vip", holderConf, []form{
	{"a sequence", true, oldVIP("~SEQ(i, 98, 102) 192.168.1.${i}/32")},
	{"a sequence, its variable not ended", false, oldVIP("192.168.1.101\n        ~SEQ(i, 98, 102) 192.168.1.$i/32")},
	{"a sequence without it", false, oldVIP("~SEQ(i, 101, 105) 192.168.1.${i}/32")},
	{"a sequence by a step", true, oldVIP("~SEQ(i, 90, 5, 110) 192.168.1.$i")},
	{"a sequence stepping past it", false, oldVIP("~SEQ(i, 90, 3, 110) 192.168.1.$i")},
	{"a sequence down", true, oldVIP("~SEQ(i, 110, -5, 95) 192.168.1.$i")},
	{"a sequence to it from 1", true, oldVIP("~SEQ(i, 100) 192.168.1.$i")},
	{"a sequence stepping away", false, oldVIP("192.168.1.101\n        ~SEQ(i, 100, 1, 99) 192.168.1.$i")},
	{"a sequence of step 0", false, oldVIP("192.168.1.101\n        ~SEQ(i, 100, 0, 100) 192.168.1.$i")},
	{"a sequence in hexadecimal", true, oldVIP("~SEQx(i, 0x10, 0x10) 192.168.1.${i}0")},
	{"a sequence in hexadecimal from -1", false, oldVIP("192.168.1.101\n        ~SEQx(i, -1, 1, 0x10) 192.168.1.${i}0")},
	{"a sequence with anything for its comma", true, oldVIP("~SEQ(i 5) 192.168.1.10$i")},
	{"a sequence from a parameter", true, "$N=100\n" + oldVIP("~SEQ(i, $N, $N) 192.168.1.$i")},
	{"a sequence for this host", true, oldVIP("192.168.1.101\n        @HOST ~SEQ(i, 100, 100) 192.168.1.$i")},
	{"a sequence for another host", false, oldVIP("192.168.1.101\n        @not-HOST ~SEQ(i, 100, 100) 192.168.1.$i")},
	{"its variable after it", true, oldVIP("~SEQ(i, 98, 100) 10.0.0.$i\n        192.168.1.$i")},
	{"sequences nested", true, oldVIP("~SEQ(h, 0, 1) ~SEQ(t, $h, 1) 192.168.1.1${h}${t}")},
	{"sequences nested without it", false, oldVIP("~SEQ(h, 1, 2) ~SEQ(t, $h, 2) 192.168.1.1${h}${t}")},
	{"a list", true, oldVIP("~LST(a, 101, 100) 192.168.1.$a")},
	{"a list without it", false, oldVIP("~LST(a, 101, 102) 192.168.1.$a")},
	{"a list of sets, one short", true, oldVIP("~LST({a, b}, {101, 1}, {102}) 192.168.1.10${b}0")},
	{"a list of sets with too many", false, oldVIP("192.168.1.101\n        ~LST({a}, {100, 1}) 192.168.1.$a")},
	{"the instance generated", true,
		"$OLD= \\\n" + strings.ReplaceAll(strings.TrimSuffix(oldVIP("${vip}"), "\n"), "\n", " \\\n") + "\n\n~LST(vip, 192.168.1.100) $OLD\n"},
}}

// bracing: an instance old_vip holding 192.168.1.100 or not, as
// keepalived reads the text after a "{" or "}" on a line again as a line
// of its own (atBrace): conditions, definitions, ~SEQ and substitution
// apply to it, and a condition not met drops it, its braces too.
var bracing = formTable{"192.168.1.100 held by old_vip", holderConf, []form{
	{"a block on one line", true, oldVIPWith("virtual_ipaddress { 192.168.1.100/32 dev eth1 }")},
	{"a line for this host after a brace", true, oldVIPWith("virtual_ipaddress { @HOST 192.168.1.100 }")},
	{"a line for another host after a brace", false, oldVIPWith("virtual_ipaddress { @not-HOST 192.168.1.100 }\n        192.168.1.101\n    }")},
	{"a line for another host after a brace, its brace dropped", true, oldVIPWith("virtual_ipaddress { @not-HOST 192.168.1.101 }\n        192.168.1.100\n    }")},
	{"a line for every host but another after a brace", true, oldVIPWith("virtual_ipaddress { @^not-HOST 192.168.1.100 }")},
	{"a line for every host but this after a brace", false, oldVIPWith("virtual_ipaddress { @^HOST 192.168.1.100 }\n        192.168.1.101\n    }")},
	{"a parameter after a brace", true, "$V=192.168.1.100\n" + oldVIPWith("virtual_ipaddress { $V }")},
	{"a parameter defined after a brace", true, oldVIPWith("virtual_ipaddress { $V=192.168.1.100\n        $V\n    }")},
	{"a parameter making a condition after a brace", true, "$V=@HOST 192.168.1.100\n" + oldVIPWith("virtual_ipaddress { $V }")},
	{"a ~SEQ after a brace", true, oldVIPWith("virtual_ipaddress { ~SEQ(i, 99, 100) 192.168.1.$i\n    }")},
	{"text after the instance's brace", true, "vrrp_instance old_vip { state BACKUP\n    interface eth1\n    virtual_router_id 60\n    priority 100\n    advert_int 1\n    virtual_ipaddress { 192.168.1.100 } }\n"},
	{"another instance opened after a closing brace", true, oldVIPWith("virtual_ipaddress { 192.168.1.100 }\n} vrrp_instance other { state BACKUP\n    interface eth1\n    virtual_router_id 61\n    priority 100\n    virtual_ipaddress { 192.168.1.101 }")},
	{"another instance for another host opened after a closing brace", false, oldVIPWith("virtual_ipaddress { 192.168.1.101 }\n} @not-HOST vrrp_instance other {\n    192.168.1.100\n    }")},
	{"a brace in quotes", false, oldVIPWith("virtual_ipaddress { 192.168.1.101 label \"eth1:{\" }\n    192.168.1.100\n    }")},
}}

// oldVIPWith is an instance old_vip holding text after its settings.
func oldVIPWith(text string) string {
	return "vrrp_instance old_vip {\n    state BACKUP\n    interface eth1\n    virtual_router_id 60\n    priority 100\n    advert_int 1\n    " + text + "\n}\n"
}

func TestCheckOtherHoldersBraces(t *testing.T) {
	bracing.check(t, (*Conf).CheckOtherHolders, func(err error) bool { return err != nil })
}

func TestCheckOtherHoldersGenerated(t *testing.T) {
	generating.check(t, (*Conf).CheckOtherHolders, func(err error) bool { return err != nil })
}

func TestCheckStrict(t *testing.T) {
	cfg := testconfig.WithBackend(t, "192.168.1.1:6443", goldenCases["minimal"]...)
	instance := func(name, extra string) string {
		return "vrrp_instance " + name + " {\n    interface eth1\n    virtual_router_id 51\n" + extra + "    track_script {\n        vipproxy_probe\n    }\n}\n"
	}
	cases := []confCase{
		{"the rendered snippet", string(Render(cfg)), ""},
		{"vrrp_strict", "global_defs {\n    router_id LVS_DEVEL\n    vrrp_strict\n}\n" + string(Render(cfg)),
			"keepalived.conf:3: vrrp_strict: vrrp_strict in global_defs: on the master keepalived drops every packet to and from the VIP"},
		{"strict_mode", instance("vipproxy", "    strict_mode\n"), "strict_mode in vrrp_instance vipproxy"},
		{"strict_mode on", instance("vipproxy", "    strict_mode on\n"), "strict_mode in vrrp_instance vipproxy"},
		{"strict_mode off", instance("vipproxy", "    strict_mode off\n"), ""},
		{"no_accept", instance("vipproxy", "    no_accept\n"), "no_accept in vrrp_instance vipproxy"},
		{"no_accept in another instance", instance("other", "    no_accept\n"), ""},
		{"vrrp_strict in a comment", "global_defs {\n    # vrrp_strict\n}\n", ""},
	}
	checkEach(t, (*Conf).CheckStrict, cfg, cases)
}

// confCase is a keepalived.conf and what a check must say of it.
type confCase struct {
	name, conf string
	want       string // "" means accepted; else a substring of the error
}

// checkEach runs check on each case's file.
func checkEach(t *testing.T, check func(*Conf, *config.Valid) error, cfg *config.Valid, cases []confCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := readAndCheck(cfg, testutil.WriteFile(t, t.TempDir(), "keepalived.conf", c.conf), check)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("rejected: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// TestDecomment holds decomment to keepalived's (lib/parser.c).
func TestDecomment(t *testing.T) {
	for in, want := range map[string]string{
		"  a b  ":               "a b",
		"a # b":                 "a",
		"a ! b":                 "a",
		`a "b # c" # d`:         `a "b # c"`,
		`a \# b`:                "a # b",
		`a \! b # c`:            "a ! b",
		`a "\# b"`:              `a "\# b"`,
		`a \" # b`:              `a \"`,
		`a \`:                   `a\`,
		`a # b \`:               `a\`,
		`"unterminated # b`:     `"unterminated # b`,
		"# only a comment":      "",
		"\tvirtual_ipaddress {": "virtual_ipaddress {",
	} {
		if got := decomment(in); got != want {
			t.Errorf("decomment(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSubstitutionEnds: keepalived loops for ever on a parameter whose
// value holds itself; reading such a file must end, and the lines after
// it still count.
func TestSubstitutionEnds(t *testing.T) {
	cfg := testconfig.WithBackend(t, "192.168.1.1:6443", goldenCases["minimal"]...)
	for _, def := range []string{"$A=$A", "$A=$A $A", "$A=${A}x", "$M= \\\n$M\n\n$M", "$M= \\\nx \\\n$M\n\n$M", "$M= \\\n$M \\\n$M\n\n$M"} {
		conf := testutil.WriteFile(t, t.TempDir(), "keepalived.conf", def+"\n$A\n${A}\n"+trackConf("track_script {\n        vipproxy_probe\n    }"))
		if err := readAndCheck(cfg, conf, (*Conf).CheckTracksProbe); err != nil && !strings.Contains(err.Error(), "deeper than") && !strings.Contains(err.Error(), "does not end") {
			t.Errorf("%q: %v", def, err)
		}
	}
}

// readAndCheck reads the keepalived.conf at path as keepalived with its
// default config id does and runs check on it: the error of either.
func readAndCheck(cfg *config.Valid, path string, check func(*Conf, *config.Valid) error) error {
	c, err := Read(path, "")
	if err != nil {
		return err
	}
	return check(c, cfg)
}

// FuzzRead: whatever the file holds, reading it as keepalived does ends
// (keepalived itself loops for ever on some parameters) without a panic,
// and each check gives a verdict. Seeds: the forms the kernel tests hold
// to keepalived.
func FuzzRead(f *testing.F) {
	for _, table := range []formTable{tracking, holding, generating, bracing} {
		for _, form := range table.forms {
			f.Add(table.whole(form.text))
		}
	}
	f.Add("$A=$A\n$A ${A} $B\n@x $B=\\\n$B\n\n$B\ninclude keepalived.conf\n")
	f.Add("~SEQ(i, 1, 1, 1000000000) $i\n~SEQx(j 3) ~LST({a,b}, {1,2}, 3) $a$b$j\n$S=~SEQ(i, 2) $S\n$S\n~LST(v)\n")
	f.Add("x { @x y } z\n} $A=1 {\nx { include a.conf\n$B=} @x\n$B { $B\n")
	f.Add("@x include *.conf\n$F=keepalived\ninclude ${F}.conf\n$I=include x\n$I\n~LST(f, a) include $f\n$M= \\\ninclude x\n")
	cfg := testconfig.WithBackend(f, "192.168.1.1:6443", goldenCases["dual-stack"]...)
	f.Fuzz(func(t *testing.T, text string) {
		path := testutil.WriteFile(t, t.TempDir(), "keepalived.conf", text)
		c, err := Read(path, "x")
		if err != nil {
			return
		}
		c.CheckTracksProbe(cfg)
		c.CheckVIPReachable(cfg)
	})
}

// TestReadSeqLst holds the lines ~SEQ and ~LST generate to those keepalived
// 2.2.7 reads (lib/parser.c: add_seq, add_lst, read_line), each statement
// its line number and words, for config id "h".
func TestReadSeqLst(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       []string
	}{
		{"to END from 1", "~SEQ(i, 3) a $i", []string{"1 a 1", "1 a 2", "1 a 3"}},
		{"to END 0 from 1", "~SEQ(i, 0) a $i", []string{"1 a 1", "1 a 0"}},
		{"to a negative END from -1", "~SEQ(i, -2) a $i", []string{"1 a -1", "1 a -2"}},
		{"START to END, down", "~SEQ(i, 5, 3) a $i", []string{"1 a 5", "1 a 4", "1 a 3"}},
		{"by STEP", "~SEQ(i, 1, 3, 8) a $i", []string{"1 a 1", "1 a 4", "1 a 7"}},
		{"by a negative STEP", "~SEQ(i, 8, -3, 1) a $i", []string{"1 a 8", "1 a 5", "1 a 2"}},
		{"START is END", "~SEQ(i, 2, 5, 2) a $i", []string{"1 a 2"}},
		{"STEP 0", "~SEQ(i, 1, 0, 3) a $i\nb", []string{"2 b"}},
		{"STEP away from END", "~SEQ(i, 1, -1, 3) a $i\n~SEQ(i, 3, 1, 1) a $i\nb", []string{"3 b"}},
		{"hexadecimal", "~SEQx(i, 9, 3, 15) a $i", []string{"1 a 9", "1 a c", "1 a f"}},
		{"hexadecimal, negative", "~SEQx(i, -1, 1, 3) a $i\nb", []string{"2 b"}},
		{"numbers as C reads them", "~SEQ(i, 010, 0x0a) a $i\n~SEQ(i, +1, -1, -1) b $i", []string{"1 a 8", "1 a 9", "1 a 10", "2 b 1", "2 b 0", "2 b -1"}},
		{"not an octal number", "~SEQ(i, 08) a $i\nb", []string{"2 b"}},
		{"anything for the comma after the name", "~SEQ(i 5) a $i", []string{"1 a 1", "1 a 0"}},
		{"blanks", "~SEQ ( i , 2 , 3 )   a $i\n~SEQx (i, 1) b $i", []string{"1 a 2", "1 a 3", "2 b 1"}},
		{"malformed", "~SEQ x(i, 1) a\n~SEQ i, 3) a\n~SEQ(i, 3 a $i\n~SEQ(, 3) a\n~SEQ(i) a\n~SEQUENCE(i, 3) a\nb", []string{"7 b"}},
		{"numbers substituted", "$N=2, 3\n~SEQ(i, $N) a $i", []string{"2 a 2", "2 a 3"}},
		{"numbers filling add_seq's buffer", "~SEQ(i, " + strings.Repeat("0", 61) + "2) a $i", []string{"1 a 1", "1 a 2"}},
		{"numbers past add_seq's buffer", "~SEQ(i, " + strings.Repeat("0", 62) + "2) a $i\nb", []string{"2 b"}},
		{"a substitution past add_seq's buffer", "$N=" + strings.Repeat("0", 62) + "2\n~SEQ(i, $N) a $i\nb", []string{"3 b"}},
		{"the variable kept after", "~SEQ(i, 2) a $i\nb $i", []string{"1 a 1", "1 a 2", "2 b 2"}},
		{"nested", "~SEQ(i, 2) ~SEQ(j, $i, 2) ${i}.$j", []string{"1 1.1", "1 1.2", "1 2.2"}},
		{"conditional lines", "@h ~SEQ(i, 1) a $i\n@x ~SEQ(i, 1) b $i\n~SEQ(i, 2) @h c $i\n~SEQ(i, 2) @^h d $i", []string{"1 a 1", "3 c 1", "3 c 2"}},
		{"from a parameter", "$S=~SEQ(i, 2) a $i\n$S", []string{"2 a 1", "2 a 2"}},
		{"from a parameter, nothing to substitute after", "$S=~SEQ(i, 2) a b\n$S", []string{"2 ~SEQ(i, 2) a b"}},
		{"defining", "~LST(n, a, b) $X=$n\n$X", []string{"2 b"}},
		{"in a multiline definition", "$M= \\\n~SEQ(i, 2) a $i \\\nb\n\n$M", []string{"5 a 1", "5 a 2", "5 b"}},
		{"of a multiline definition", "$M= \\\nx $i \\\ny $i\n\n~SEQ(i, 2) $M", []string{"5 x 1", "5 y 1", "5 x 2", "5 y 2"}},
		{"a list", "~LST(v, a, b, c) x $v", []string{"1 x a", "1 x b", "1 x c"}},
		{"a list of sets", "~LST({a,b}, {1,2}, {3}, 4) x $a $b", []string{"1 x 1 2", "1 x 3", "1 x 4"}},
		{"a list with blanks", "~LST( { a , b } , { 1 , 2 } , 3 )  x $a $b", []string{"1 x 1 2", "1 x 3"}},
		{"a list with a blank value", "~LST(v, , b) x ${v}y", []string{"1 x y", "1 x by"}},
		{"a list malformed", "~LST(v) x\n~LST v, a) x\n~LST({a,b}, {1,2) x\n~LST({a}, {1,2}) x\n~LST(v, {a, b}) x\nb", []string{"6 b"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := readNumbered(t, c.text); !slices.Equal(got, c.want) {
				t.Errorf("read\n%s\nas %q, want %q", c.text, got, c.want)
			}
		})
	}
}

// TestReadBraces holds the statements read from lines with braces to those
// keepalived 2.2.7 reads (lib/parser.c, the end of read_line): the text
// after the first "{" or "}" outside quotes read again as a line, through
// conditions, definitions, ~SEQ, ~LST and substitution, before the rest of
// a multiline definition or a sequence; each statement its line number and
// words, for config id "h".
func TestReadBraces(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       []string
	}{
		{"a block on one line", "a { b }", []string{"1 a", "1 {", "1 b", "1 }"}},
		{"no blanks", "a{b}c", []string{"1 a", "1 {", "1 b", "1 }", "1 c"}},
		{"braces together", "a {{ b }}", []string{"1 a", "1 {", "1 {", "1 b", "1 }", "1 }"}},
		{"a closing brace first", "} a {", []string{"1 }", "1 a", "1 {"}},
		{"a line for this id", "x { @h y }", []string{"1 x", "1 {", "1 y", "1 }"}},
		{"a line for another id, its brace dropped", "x { @o y }\nz", []string{"1 x", "1 {", "2 z"}},
		{"a line for any id but another", "x { @^o y }", []string{"1 x", "1 {", "1 y", "1 }"}},
		{"a line for any id but this", "x { @^h y }", []string{"1 x", "1 {"}},
		{"after a closing brace, for another id", "x {\n} @o y {\nz", []string{"1 x", "1 {", "2 }", "3 z"}},
		{"a definition", "x { $V=1\n$V", []string{"1 x", "1 {", "2 1"}},
		{"a definition after a closing brace", "x }$V=1\n$V", []string{"1 x", "1 }", "2 1"}},
		{"a parameter making a condition", "$V=@h y\nx { $V }\n$W=@o y\nx { $W }", []string{"2 x", "2 {", "2 y", "2 }", "4 x", "4 {"}},
		{"a parameter after a brace", "$V=y\nx{$V }", []string{"2 x", "2 {", "2 y", "2 }"}},
		{"a parameter before a brace, not ended there", "$V=y\nx{$V}", []string{"2 x", "2 {", "2 $V", "2 }"}},
		{"braces in quotes", `x "a{b}" { "c}" }`, []string{"1 x a{b}", "1 {", "1 c}", "1 }"}},
		{"a quote not closed", `x "a { b`, []string{"1 x"}},
		{"a quote not closed after a brace", `x { "a } b`, []string{"1 x", "1 {"}},
		{"braces in a comment", "x { y # z }", []string{"1 x", "1 {", "1 y"}},
		{"a ~SEQ after a brace", "x { ~SEQ(i, 2) y $i\nz", []string{"1 x", "1 {", "1 y 1", "1 y 2", "2 z"}},
		{"braces in generated lines", "~SEQ(i, 2) a { $i }", []string{"1 a", "1 {", "1 1", "1 }", "1 a", "1 {", "1 2", "1 }"}},
		{"braces in a multiline definition", "$M= \\\na { b \\\nc }\n\n$M", []string{"5 a", "5 {", "5 b", "5 c", "5 }"}},
		{"a multiline definition after a brace", "$M= \\\na \\\nb\n\nx { $M", []string{"5 x", "5 {", "5 a", "5 b"}},
		{"a multiline definition opened after a brace", "x { $M= \\\ny \\\nz\n\n$M", []string{"1 x", "1 {", "5 y", "5 z"}},
		{"a ~SEQ after a brace before the rest of a multiline definition", "$M= \\\nx { ~SEQ(i, 2) a $i \\\nb\n\n$M", []string{"5 x", "5 {", "5 a 1", "5 a 2", "5 b"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := readNumbered(t, c.text); !slices.Equal(got, c.want) {
				t.Errorf("read\n%s\nas %q, want %q", c.text, got, c.want)
			}
		})
	}
}

// TestSeqEnds: keepalived reads a sequence of a billion lines, or one that
// wraps past the largest long, to its end; reading it must end, with an
// error naming the line. So must reading what vipproxy does not follow,
// ~SEQ and ~LST with a malformed ~LST (checkLstCount).
func TestSeqEnds(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"~SEQ(i, 1, 1, 1000000000) a $i", "keepalived.conf:2: ~SEQ(i, 1, 1, 1000000000) generates over"},
		{"~SEQ(i, 99999999999999999999) a", "keepalived.conf:2: ~SEQ(i, 99999999999999999999) generates over"},
		{"~SEQ(i, 9223372036854775806, 1, 9223372036854775807) a", "generates over"},
		{"~SEQ(i, 200) ~SEQ(j, 200) a $i $j", "keepalived.conf:2: ~SEQ(j, 200) generates over"},
		{"$S=~SEQ(i, 2) $S\n$S", "deeper than"},
		{"$M= \\\n" + strings.Repeat("x \\\n", 50) + "y\n\n~SEQ(i, 1000) $M", "keepalived.conf:55: multiline definitions, with the ~SEQ and ~LST before them, generate over"},
		// keepalived generates the ~SEQ after the malformed ~LST, not before.
		{"~SEQ(i, 2) a $i\n~LST(v) x", "keepalived.conf:3: malformed ~LST"},
		{"~LSTx\n~LST(v, a) x", "keepalived.conf:2: malformed ~LST"},
	} {
		start := time.Now()
		_, err := readLines(testutil.WriteFile(t, t.TempDir(), "keepalived.conf", "a\n"+c.text+"\n"), "h")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.text, err, c.want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%q: took %v", c.text, d)
		}
	}
}

// TestReadIncludes holds the includes read to those keepalived 2.2.7's
// VRRP and checker processes read (lib/parser.c: read_line, check_include,
// and the copy of the configuration they read), each statement its file,
// line number and words, for config id "h": parameters substituted in an
// include line first, includes made by conditions, parameters, ~SEQ and
// ~LST refused (madeInclude), as are multiline definitions around them.
func TestReadIncludes(t *testing.T) {
	files := map[string]string{
		"a.conf":     "a1\na2",
		"b.conf":     "b1",
		"sub/a.conf": "sub a1\ninclude b.conf",
		"sub/b.conf": "sub b1",
		"sub/d/x":    "x",  // a directory the glob sub/* matches
		"h.conf":     "h1", // include ${_INSTANCE}.conf
	}
	for _, c := range []struct {
		name, text string
		want       []string // statements read, or
		err        string   // an error wanted, with its file and line
	}{
		{"plain", "x\ninclude a.conf\ny", []string{"keepalived.conf:1 x", "a.conf:1 a1", "a.conf:2 a2", "keepalived.conf:3 y"}, ""},
		{"relative to the including file", "include sub/a.conf", []string{"sub/a.conf:1 sub a1", "sub/b.conf:1 sub b1"}, ""},
		{"a parameter", "$D=sub\ninclude ${D}/a.conf", []string{"sub/a.conf:1 sub a1", "sub/b.conf:1 sub b1"}, ""},
		{"a parameter in braces, globbed", "$F=a\ninclude ${F}*.conf", []string{"a.conf:1 a1", "a.conf:2 a2"}, ""},
		{"parameters within parameters", "$F=${G}\n$G=b\nincludew ${F}.conf", []string{"b.conf:1 b1"}, ""},
		{"a definition for this id", "@h $F=a\n@^h $F=b\ninclude ${F}.conf", []string{"a.conf:1 a1", "a.conf:2 a2"}, ""},
		{"a definition for another id", "@x $F=a\n@^x $F=b\ninclude ${F}.conf", []string{"b.conf:1 b1"}, ""},
		{"the config id", "include ${_INSTANCE}.conf", []string{"h.conf:1 h1"}, ""},
		{"a parameter not ended", "$D=sub\ninclude $D/a.conf", nil, ""},
		{"a comment after the parameter", "$F=b.conf\ninclude $F # a.conf", []string{"b.conf:1 b1"}, ""},
		{"a glob, directories and executables skipped", "include sub/*", []string{"sub/a.conf:1 sub a1", "sub/b.conf:1 sub b1", "sub/b.conf:1 sub b1"}, ""},
		{"a loop through a parameter", "$S=keepalived.conf\ninclude $S", nil, "nested deeper"},
		{"for another id", "x\n@x include a.conf\n@^h include a.conf", []string{"keepalived.conf:1 x"}, ""},
		{"globbed, for another id", "x\n@x include *.conf", []string{"keepalived.conf:1 x"}, ""},
		{"for this id", "x\n@h include a.conf", nil, `keepalived.conf:2: "include a.conf" is an include made by`},
		{"for any id but another", "@^x includer a.conf", nil, `keepalived.conf:1: "includer a.conf" is an include made by`},
		{"globbed, for this id", "@h include *.conf", nil, "keepalived.conf:1: \"include *.conf\" is an include made by"},
		{"made by a parameter", "$I=include a.conf\n$I", nil, `keepalived.conf:2: "include a.conf" is an include made by`},
		{"made by a parameter for this id", "@h $I=include a.conf\n@h $I", nil, "keepalived.conf:2: \"include a.conf\" is an include made by"},
		{"made by ~SEQ", "~SEQ(i, 2) include sub/${i}.conf", nil, "keepalived.conf:1: \"include sub/1.conf\" is an include made by"},
		{"made by ~LST", "~LST(f, b, a) include ${f}.conf", nil, "keepalived.conf:1: \"include b.conf\" is an include made by"},
		{"made by a multiline definition", "$M= \\\nx \\\n@h include a.conf\n\n$M", nil, "keepalived.conf:5: \"include a.conf\" is an include made by"},
		{"within a multiline definition", "$M= \\\nx \\\ninclude a.conf \\\ny\n\n$M", nil, "keepalived.conf:3: an include line within a multiline definition"},
		{"using a multiline definition", "$M= \\\na.conf \\\ny\n\ninclude $M", nil, `keepalived.conf:5: "include a.conf": a multiline definition in an include line`},
		{"after a brace", "x { include a.conf", nil, `keepalived.conf:1: "include a.conf" is an include made by`},
		{"after a closing brace", "x\n} includer a.conf", nil, `keepalived.conf:2: "includer a.conf" is an include made by`},
		{"after a brace, for this id", "x { @h include a.conf", nil, `keepalived.conf:1: "include a.conf" is an include made by`},
		{"after a brace, for another id", "x { @x include a.conf", []string{"keepalived.conf:1 x", "keepalived.conf:1 {"}, ""},
		{"a brace after an include line", "include b.conf }", nil, ""}, // the pattern is "b.conf }"
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range files {
				testutil.WriteFile(t, dir, name, text+"\n")
			}
			// keepalived skips an executable file an include matches.
			if err := os.Chmod(testutil.WriteFile(t, dir, "sub/run.sh", "a line\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			lines, err := readLines(testutil.WriteFile(t, dir, "keepalived.conf", c.text+"\n"), "h")
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Errorf("read\n%s\ngot %v, want an error containing %q", c.text, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range lines {
				rel, _ := filepath.Rel(dir, l.file)
				got = append(got, fmt.Sprintf("%s:%d %s", rel, l.num, strings.Join(l.words, " ")))
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("read\n%s\nas %q, want %q", c.text, got, c.want)
			}
		})
	}
}

// readNumbered reads text as a keepalived.conf for config id "h": each
// statement its line number and words.
func readNumbered(t *testing.T, text string) []string {
	t.Helper()
	lines, err := readLines(testutil.WriteFile(t, t.TempDir(), "keepalived.conf", text+"\n"), "h")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines {
		got = append(got, fmt.Sprintf("%d %s", l.num, strings.Join(l.words, " ")))
	}
	return got
}

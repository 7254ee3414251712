package keepalived

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/internal/testutil/testconfig"
	"github.com/vipproxy/vipproxy/service/config"
)

// mainConf includes the snippet as documented, after the global_defs
// that let keepalived run its probe.
const mainConf = scriptSecurity + "include vipproxy.conf\n"

// TestGoldenPassesKeepalivedConfigTest runs keepalived's own parser
// (keepalived --config-test) on every golden case, inside a private network
// namespace that has the interfaces the snippets name.
func TestGoldenPassesKeepalivedConfigTest(t *testing.T) {
	ns := keepalivedNS(t)
	ns.Veth(t, "eth2", "eth2p")
	for name, lines := range goldenCases {
		cfg := testconfig.WithBackend(t, "192.168.1.1:6443", lines...)
		// keepalived disables a track script whose program does not exist,
		// and /usr/bin/vipproxy is not installed here.
		cfg.Keepalived.ProbeCommand = "/bin/true"
		data := Render(cfg)
		dir := t.TempDir()
		testutil.WriteFile(t, dir, "vipproxy.conf", string(data))
		conf := testutil.WriteFile(t, dir, "keepalived.conf", mainConf)
		out, err := ns.Exec("keepalived", "--config-test", "-f", conf)
		if err != nil {
			t.Errorf("keepalived --config-test (case %s): %v\n%s\n%s", name, err, out, data)
		}
	}
}

// TestProbeGetsTheConfigPath runs keepalived on the snippet of a config
// kept at each of some awkward paths: whatever path the config accepts,
// the probe keepalived runs gets it unchanged after --config. keepalived
// reads the script line as a quoted string with shell-like escapes and
// splits it at spaces, single quotes grouping: a path with a single quote
// made it drop the script and the instance's tracking of it (the VIP no
// longer followed the proxy's readiness), and a backslash began an escape
// (a\b.toml reached the probe as "a", a backspace, ".toml").
func TestProbeGetsTheConfigPath(t *testing.T) {
	ns := keepalivedNS(t)
	dir := t.TempDir()
	// The probe records its arguments, each ended by a NUL. It lies under
	// a path with a space, quoted as the default probe_command quotes
	// this binary's path there (probeCommandOf).
	probe := testutil.WriteFile(t, dir, "with space/probe.sh", "#!/bin/sh\nprintf '%s\\0' \"$@\" > \"$0.args\"\n")
	if err := os.Chmod(probe, 0o755); err != nil {
		t.Fatal(err)
	}
	accepted := 0
	for i, path := range []string{
		"/etc/vipproxy/vipproxy.toml",
		"/etc/vipproxy/a#b!c.toml",
		"/etc/vipproxy/a$b;c&d|e.toml",
		"/etc/vipproxy/a{b}c*d?e[f].toml",
		"/etc/vipproxy/a%b~cé(d)=e,f@g+h.toml",
		"/etc/vip proxy/vipproxy.toml",
		"/etc/vipproxy/it's.toml",
		`/etc/vipproxy/a\b.toml`,
		`/etc/vipproxy/"a".toml`,
		"/etc/vipproxy/a\tb.toml",
	} {
		cfg, err := config.Parse(path, []byte(`[vip]
addresses = ["192.168.1.100"]
[network]
uplinks = ["eth1"]
[keepalived]
probe_command = "'`+probe+`' probe"
[[backend]]
address = "192.168.1.1:6443"
`))
		if err != nil {
			var cerr *config.Error
			if !errors.As(err, &cerr) || cerr.Key != "keepalived.probe_command" {
				t.Errorf("config at %q refused for another reason: %v", path, err)
			}
			continue
		}
		accepted++
		// A plain name: t.TempDir is named after the test, and keepalived
		// expands braces in its -f path.
		t.Run(fmt.Sprintf("path%d", i), func(t *testing.T) {
			os.Remove(probe + ".args")
			run := t.TempDir()
			testutil.WriteFile(t, run, "vipproxy.conf", string(Render(cfg)))
			conf := testutil.WriteFile(t, run, "keepalived.conf", mainConf)
			startKeepalived(t, ns, conf, "--vrrp")
			var args []byte
			for range 200 { // 20 s: the script runs at keepalived's start
				if args, err = os.ReadFile(probe + ".args"); err == nil && len(args) > 0 {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if want := "probe\x00--config\x00" + path + "\x00"; string(args) != want {
				t.Errorf("config at %q: the probe got %q, want %q", path, args, want)
			}
		})
	}
	if accepted < 2 {
		t.Errorf("only %d of the paths accepted; the test needs a few", accepted)
	}
}

// TestBraceIncludeReadAsKeepalivedReads: keepalived globs an include with
// csh-style alternatives, so the vipproxy snippet reached only through
// them is tracked, and CheckTracksProbe must see it there too; so with
// each of the include variants (includer, includem, ...), which differ
// only in the errors keepalived reports.
func TestBraceIncludeReadAsKeepalivedReads(t *testing.T) {
	ns := keepalivedNS(t)
	cfg := testconfig.WithBackend(t, "192.168.1.1:6443", goldenCases["minimal"]...)
	cfg.Keepalived.ProbeCommand = "/bin/true"
	for _, keyword := range []string{"include", "includer", "includem", "includew", "includeb", "includea"} {
		t.Run(keyword, func(t *testing.T) {
			dir := t.TempDir()
			testutil.WriteFile(t, dir, "extra/vipproxy.conf", string(Render(cfg)))
			testutil.WriteFile(t, dir, "conf.d/empty.conf", "# nothing here\n")
			conf := testutil.WriteFile(t, dir, "keepalived.conf", strings.Replace(mainConf, "include vipproxy.conf", keyword+" {conf.d,extra}/*.conf", 1))
			out, err := ns.Exec("keepalived", "--config-test", "-f", conf)
			if err != nil || strings.Contains(out, "not found") {
				t.Fatalf("keepalived --config-test does not read the snippet through the braces: %v\n%s", err, out)
			}
			if err := readAndCheck(cfg, conf, (*Conf).CheckTracksProbe); err != nil {
				t.Errorf("CheckTracksProbe: %v", err)
			}
		})
	}
}

// TestTrackingReadAsKeepalivedReads: vipproxy_probe is listed in the
// "Tracked scripts" of keepalived's dump exactly when the form says it is
// tracked, the verdict TestCheckTracksProbe holds CheckTracksProbe to.
func TestTrackingReadAsKeepalivedReads(t *testing.T) {
	tracking.dump(t, tracksProbe)
}

// tracksProbe reads an instance's dump: vipproxy_probe among its tracked
// scripts.
func tracksProbe(dump string) bool {
	i := strings.Index(dump, "Tracked scripts")
	return i >= 0 && strings.Contains(dump[i:], " vipproxy_probe weight ")
}

// TestHoldersReadAsKeepalivedReads: old_vip's virtual IPs in keepalived's
// dump list 192.168.1.100 exactly when the form says it holds the VIP, the
// verdict TestCheckOtherHoldersAsKeepalived holds CheckOtherHolders to.
func TestHoldersReadAsKeepalivedReads(t *testing.T) {
	holding.dump(t, oldVIPListsTheVIP)
}

// vipInDump is 192.168.1.100 as keepalived's dump lists a virtual IP.
var vipInDump = regexp.MustCompile(`\s192\.168\.1\.100[/ ]`)

// oldVIPListsTheVIP: keepalived's dump lists 192.168.1.100 among the
// virtual IPs of its instance old_vip.
func oldVIPListsTheVIP(dump string) bool {
	return vipInDump.MatchString(dump[strings.Index(dump, "VRRP Instance = old_vip"):])
}

// holdersBeside holds keepalived's dump of each form of table to the form's
// verdict (oldVIPListsTheVIP), with vipproxy's reading (CheckOtherHolders)
// beside it.
func holdersBeside(t *testing.T, table formTable) {
	cfg := testconfig.WithBackend(t, "192.168.1.1:6443", goldenCases["minimal"]...)
	table.dumpBeside(t, oldVIPListsTheVIP, func(t *testing.T, text string) bool {
		return readAndCheck(cfg, testutil.WriteFile(t, t.TempDir(), "keepalived.conf", text), (*Conf).CheckOtherHolders) != nil
	})
}

// TestSeqLstReadAsKeepalivedReads: old_vip's virtual IPs in keepalived's
// dump list 192.168.1.100 exactly when the form, generating them with ~SEQ
// and ~LST, says it holds the VIP, the verdict
// TestCheckOtherHoldersGenerated holds CheckOtherHolders to.
// Each form is also read as vipproxy reads it, beside keepalived's dump.
func TestSeqLstReadAsKeepalivedReads(t *testing.T) {
	holdersBeside(t, generating)
}

// TestBracesReadAsKeepalivedReads: old_vip's virtual IPs in keepalived's
// dump list 192.168.1.100 exactly when the form, with text after braces
// on its lines, says it holds the VIP, the verdict
// TestCheckOtherHoldersBraces holds CheckOtherHolders to. Each form is
// also read as vipproxy reads it, beside keepalived's dump.
func TestBracesReadAsKeepalivedReads(t *testing.T) {
	holdersBeside(t, bracing)
}

// dump starts keepalived on each form with its configuration dump (-d)
// and holds found, read from the dump of its one vrrp_instance, to the
// form's. The forms go side by side, each in a namespace of its own: a
// keepalived takes a second to stop, the dump a tenth of one.
func (ft formTable) dump(t *testing.T, found func(dump string) bool) {
	ft.dumpBeside(t, found, nil)
}

// dumpBeside is dump, and holds what read finds in each whole form, unless
// read is nil, to what keepalived's dump says: the reader and keepalived
// side by side on the same file.
func (ft formTable) dumpBeside(t *testing.T, found func(dump string) bool, read func(t *testing.T, text string) bool) {
	comparedNatively(t)
	for i, f := range ft.forms {
		t.Run(fmt.Sprintf("form%d", i), func(t *testing.T) {
			t.Parallel()
			text := ft.whole(f.text)
			dump := instanceDump(t, keepalivedNS(t), text)
			got := found(dump)
			if got != f.found {
				t.Errorf("%s: keepalived's dump says %s: %v, the form says %v\n%s", f.name, ft.what, got, f.found, dump)
			}
			if read != nil && read(t, text) != got {
				t.Errorf("%s: keepalived's dump says %s: %v, vipproxy's reading %v\n%s", f.name, ft.what, got, !got, text)
			}
		})
	}
}

// TestConfigIDAsKeepalived: a keepalived started with -i reads the
// conditional lines for that id, and so must Read given the same id.
func TestConfigIDAsKeepalived(t *testing.T) {
	ns := keepalivedNS(t)
	cfg := testconfig.WithBackend(t, "192.168.1.1:6443", goldenCases["minimal"]...)
	text := trackConf("track_script {\n        other_probe\n        @main vipproxy_probe\n    }")
	conf := testutil.WriteFile(t, t.TempDir(), "keepalived.conf", text)
	for _, id := range []string{"main", "backup"} {
		dump := instanceDump(t, ns, text, "--config-id", id)
		tracked := tracksProbe(dump)
		c, err := Read(conf, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.CheckTracksProbe(cfg); (err == nil) != tracked || tracked != (id == "main") {
			t.Errorf("config id %s: keepalived tracks vipproxy_probe: %v; CheckTracksProbe: %v", id, tracked, err)
		}
	}
}

// comparedNatively skips, under qemu-user (make test-multiarch), a test
// that holds the reader to the real keepalived's dump form by form. What
// it compares is the reader's handling of text, the same Go on every
// architecture, and test-go runs it natively; the reader's own tables
// (TestReadSeqLst, TestReadBraces, TestReadIncludes) still run emulated.
// Emulated, the package took 41 s against 8 s without these tests on a
// quiet host, and 105-166 s of CI's emulated run per architecture.
func comparedNatively(t *testing.T) {
	if testutil.Emulated() {
		t.Skip("compares the reader's text handling with keepalived's: the same on every architecture, run natively by test-go")
	}
}

// instanceDump starts keepalived in ns on the keepalived.conf text with
// its configuration dump (-d) and the flags given, and returns the dump up
// to the end of its one vrrp_instance.
func instanceDump(t *testing.T, ns *testutil.NetNS, text string, flags ...string) string {
	t.Helper()
	conf := testutil.WriteFile(t, t.TempDir(), "keepalived.conf", text)
	out := startKeepalived(t, ns, conf, append([]string{"--dump-conf", "--vrrp"}, flags...)...)
	// The instance's dump ends with this line.
	const end = "Using smtp notification"
	testutil.WaitFor(t, "keepalived's configuration dump", func() bool {
		return strings.Contains(out.String(), end)
	})
	dump := out.String()
	return dump[:strings.Index(dump, end)]
}

// TestStrictDropsTheVIP starts keepalived on the rendered snippet, once
// with vrrp_strict in global_defs (as keepalived's sample config has it)
// and once without, until its instance is master: CheckStrict must fail
// exactly when keepalived put the VIP in the drop set of its nftables
// table, which cuts every connection to the proxy on the VIP.
func TestStrictDropsTheVIP(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft not installed")
	}
	cfg := testconfig.WithBackend(t, "192.168.1.1:6443", goldenCases["minimal"]...)
	cfg.Keepalived.ProbeCommand = "/bin/true"
	for _, strict := range []bool{false, true} {
		t.Run(fmt.Sprintf("vrrp_strict=%v", strict), func(t *testing.T) {
			t.Parallel()
			ns := keepalivedNS(t)
			ns.IP(t, "addr", "add", "192.168.1.2/24", "dev", "eth1")
			dir := t.TempDir()
			testutil.WriteFile(t, dir, "vipproxy.conf", string(Render(cfg)))
			top := mainConf
			if strict {
				top = strings.Replace(top, "global_defs {", "global_defs {\n    vrrp_strict", 1)
			}
			conf := testutil.WriteFile(t, dir, "keepalived.conf", top)
			out := startKeepalived(t, ns, conf, "--vrrp")
			testutil.WaitFor(t, "keepalived's instance to become master", func() bool {
				return strings.Contains(out.String(), "Entering MASTER STATE")
			})
			rules, _ := ns.Exec("nft", "list", "table", "ip", "keepalived")
			drops := strings.Contains(rules, "192.168.1.100") && strings.Contains(rules, "drop")
			checkErr := readAndCheck(cfg, conf, (*Conf).CheckStrict)
			if drops != strict || (checkErr != nil) != drops {
				t.Errorf("keepalived drops the VIP: %v; CheckStrict: %v\n%s", drops, checkErr, rules)
			}
		})
	}
}

// keepalivedNS is a private network namespace with an up veth eth1 for
// keepalived's instances; the test is skipped without keepalived.
func keepalivedNS(t *testing.T) *testutil.NetNS {
	t.Helper()
	if _, err := exec.LookPath("keepalived"); err != nil {
		t.Skip("keepalived not installed")
	}
	ns := testutil.NewNetNS(t, "vpk")
	ns.Veth(t, "eth1", "eth1p")
	return ns
}

// startKeepalived runs keepalived in ns on conf in the foreground, logging
// to its output, its pid files beside conf, until the test ends. It is
// killed then, with whatever else runs in ns, not stopped: keepalived's
// VRRP process waits a fixed second before it exits (vrrp_daemon.c,
// vrrp_terminate_phase1), a second for each of the 45 these tests start:
// the package took 68 s under qemu-user (arm64, test-multiarch), 22 s with
// the kill (and the forms side by side). Cleanups run last first: the
// kill before testutil.Start's stop, which finds keepalived ended.
func startKeepalived(t *testing.T, ns *testutil.NetNS, conf string, flags ...string) *testutil.Buffer {
	t.Helper()
	dir := filepath.Dir(conf)
	args := append([]string{"netns", "exec", ns.Name, "keepalived", "--dont-fork", "--log-console"}, flags...)
	args = append(args, "-f", conf, "-p", filepath.Join(dir, "keepalived.pid"), "-r", filepath.Join(dir, "vrrp.pid"))
	out := testutil.Start(t, exec.Command("ip", args...))
	t.Cleanup(ns.KillAll)
	return out
}

// TestIncludeReadAsKeepalivedReads: the times old_vip's virtual IPs in
// keepalived's dump list 192.168.1.100, each form reaching it, or not,
// through an include: with parameters, conditions, ~SEQ and ~LST, for
// keepalived's config id (HOST) and another. vipproxy's reading of each
// form, beside, must find old_vip holding the VIP exactly when the dump
// lists it, or refuse the form: where keepalived's VRRP process lists it
// twice, or reads the included file in part (madeInclude).
func TestIncludeReadAsKeepalivedReads(t *testing.T) {
	comparedNatively(t)
	cfg := testconfig.WithBackend(t, "192.168.1.1:6443", goldenCases["minimal"]...)
	inc := t.TempDir()
	testutil.WriteFile(t, inc, "vip.conf", "192.168.1.100/32 dev eth1\n")
	testutil.WriteFile(t, inc, "other.conf", "192.168.1.101/32 dev eth1\n")
	testutil.WriteFile(t, inc, "commented.conf", "! a comment\n192.168.1.100/32 dev eth1\n")
	testutil.WriteFile(t, inc, "node-"+defaultConfigID()+".conf", "192.168.1.100/32 dev eth1\n")
	// keepalived skips a directory or an executable file a glob matches.
	testutil.WriteFile(t, inc, "skipped/dir.conf/x", "192.168.1.100/32 dev eth1\n")
	if err := os.Chmod(testutil.WriteFile(t, inc, "skipped/run.conf", "192.168.1.100/32 dev eth1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	const first = "192.168.1.101\n        "
	for i, f := range []struct {
		name    string
		text    string // after global_defs, INC/ standing for the included files' directory
		listed  int
		refused bool
	}{
		{"a plain include", oldVIP(first + "include INC/vip.conf"), 1, false},
		{"a glob", oldVIP(first + "include INC/v*.conf"), 1, false},
		{"a glob matching a directory and an executable", oldVIP(first + "include INC/skipped/*"), 0, false},
		{"a parameter", "$F=INC/vip.conf\n" + oldVIP(first+"include $F"), 1, false},
		{"a parameter not ended", "$D=INC/.\n" + oldVIP(first+"include $D/vip.conf"), 0, false},
		{"a parameter in braces", "$D=INC/.\n" + oldVIP(first+"include ${D}/vip.conf"), 1, false},
		{"a parameter defined for this host", "@HOST $F=vip\n@^HOST $F=other\n" + oldVIP(first+"include INC/${F}.conf"), 1, false},
		{"a parameter defined for another host", "@not-HOST $F=vip\n@^not-HOST $F=other\n" + oldVIP(first+"include INC/${F}.conf"), 0, false},
		{"the config id", oldVIP(first + "include INC/node-${_INSTANCE}.conf"), 1, false},
		{"for this host", oldVIP(first + "@HOST include INC/vip.conf"), 2, true},
		{"for another host", oldVIP(first + "@not-HOST include INC/vip.conf"), 0, false},
		{"for every host but this", oldVIP(first + "@^HOST include INC/vip.conf"), 0, false},
		{"for every host but another", oldVIP(first + "@^not-HOST include INC/vip.conf"), 2, true},
		{"a glob for this host", oldVIP(first + "@HOST include INC/v*.conf"), 2, true},
		{"a glob for another host", oldVIP(first + "@not-HOST include INC/v*.conf"), 0, false},
		{"for this host, a file with a ! comment", oldVIP(first + "@HOST include INC/commented.conf"), 1, true},
		{"made by a parameter", "$I=include INC/vip.conf\n" + oldVIP(first+"$I"), 2, true},
		{"made by ~SEQ", oldVIP(first + "~SEQ(i, 1) include INC/vip.conf"), 2, true},
		{"made by ~LST", oldVIP(first + "~LST(f, other, vip) include INC/${f}.conf"), 2, true},
		{"within a multiline definition", "$M= \\\n192.168.1.101 \\\ninclude INC/vip.conf\n\n" + oldVIP("$M"), 1, true},
		{"after a brace", oldVIPWith("virtual_ipaddress { include INC/vip.conf\n        192.168.1.101\n    }"), 2, true},
		{"after a brace, a file with a ! comment", oldVIPWith("virtual_ipaddress { include INC/commented.conf\n        192.168.1.101\n    }"), 1, true},
		{"after a brace, for another host", oldVIPWith("virtual_ipaddress { @not-HOST include INC/vip.conf\n        192.168.1.101\n    }"), 0, false},
	} {
		t.Run(fmt.Sprintf("form%d", i), func(t *testing.T) {
			t.Parallel()
			text := holderConf(strings.ReplaceAll(f.text, "INC/", inc+"/"))
			dump := instanceDump(t, keepalivedNS(t), text)
			dump = dump[strings.Index(dump, "VRRP Instance = old_vip"):]
			if n := len(vipInDump.FindAllString(dump, -1)); n != f.listed {
				t.Errorf("%s: keepalived's dump lists 192.168.1.100 %d times, the form says %d\n%s", f.name, n, f.listed, dump)
			}
			err := readAndCheck(cfg, testutil.WriteFile(t, t.TempDir(), "keepalived.conf", text), (*Conf).CheckOtherHolders)
			refused := err != nil && strings.Contains(err.Error(), "include") && strings.Contains(err.Error(), "vipproxy does not follow")
			switch {
			case refused != f.refused:
				t.Errorf("%s: vipproxy's reading refused: %v, the form says %v: %v\n%s", f.name, refused, f.refused, err, text)
			case !refused && (err != nil) != (f.listed > 0):
				t.Errorf("%s: keepalived's dump lists 192.168.1.100 %d times; CheckOtherHolders: %v\n%s", f.name, f.listed, err, text)
			}
		})
	}
}

package keepalived

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/internal/testutil/testconfig"
	"github.com/vipproxy/vipproxy/service/config"
)

// TestAcceptedHostileValuesPassKeepalived renders every value that check
// accepts out of the hostile ones tried in each field
// (config's TestHostileRenderedValuesRefused refuses the others) and runs
// keepalived's own parser on it: keepalived --config-test passes, with
// the snippet included as the docs say, and the instance still tracks the
// probe. Each VRRP interface (keepalived.interface, or the first uplink)
// is created as a veth first, as the interfaces a node would have.
func TestAcceptedHostileValuesPassKeepalived(t *testing.T) {
	ns := keepalivedNS(t)
	ns.Veth(t, "eth2", "eth2p")
	seen := 0
	links := map[string]bool{"eth1": true, "eth2": true}
	for a := range testconfig.Distinct(func(cfg *config.Valid) bool {
		return cfg.VIP.Mode.UsesKeepalived() && runnable(cfg.Keepalived.ProbeCommand)
	}, Render) {
		seen++
		f, v, cfg, data := a.Field, a.Value, a.Config, a.Data
		if iface := cfg.Keepalived.Interface; !links[iface] {
			links[iface] = true
			ns.Veth(t, iface, fmt.Sprintf("kp%d", len(links)))
		}
		dir := t.TempDir()
		testutil.WriteFile(t, dir, "vipproxy.conf", string(data))
		conf := testutil.WriteFile(t, dir, "keepalived.conf", mainConf)
		if out, err := ns.Exec("keepalived", "--config-test", "-f", conf); err != nil {
			t.Errorf("%s = %.80q passes check, keepalived --config-test refuses it: %v\n%s\n%s", f.Key, v, err, out, data)
			continue
		}
		if err := readAndCheck(cfg, conf, (*Conf).CheckTracksProbe); err != nil {
			t.Errorf("%s = %.80q: %v\n%s", f.Key, v, err, data)
		}
	}
	if seen < 40 {
		t.Errorf("only %d distinct snippets rendered; the test needs the hostile values check accepts", seen)
	}
	t.Logf("keepalived --config-test passed %d distinct snippets", seen)
}

// runnable: the probe command's program is an executable file. keepalived
// disables a track script whose program is missing ("not found/accessible")
// or a directory ("insecure"): a node's files, not the config's syntax,
// which is what this test holds to keepalived's parser.
func runnable(command string) bool {
	words := strings.Fields(strings.ReplaceAll(command, "'", ""))
	if len(words) == 0 {
		return false
	}
	st, err := os.Stat(words[0])
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// TestInjectedPeerWouldRunAsRoot shows what check refuses: the unicast
// peer as it was written, rendered as the address text it is, is a
// notify_master that keepalived's own parser takes.
func TestInjectedPeerWouldRunAsRoot(t *testing.T) {
	ns := keepalivedNS(t)
	cfg := testconfig.WithBackend(t, "192.168.1.1:6443", `[vip]`, `addresses = ["2001:db8::10"]`, `port = 6443`,
		`[network]`, `uplinks = ["eth1"]`, `[keepalived]`, `probe_command = "/bin/true"`, `unicast_peers = ["2001:db8::2"]`)
	data := strings.Replace(string(Render(cfg)), "2001:db8::2\n", "2001:db8::2"+testconfig.Injection+"\n", 1)
	dir := t.TempDir()
	testutil.WriteFile(t, dir, "vipproxy.conf", data)
	conf := testutil.WriteFile(t, dir, "keepalived.conf", mainConf)
	out, _ := ns.Exec("keepalived", "--config-test", "-f", conf)
	if strings.Contains(out, "notify_master") && strings.Contains(out, "Unknown keyword") {
		t.Fatalf("keepalived does not take the injected notify_master: the attack is not as described\n%s", out)
	}
	bad := testconfig.Fields[0]
	for _, f := range testconfig.Fields {
		if f.Key == "keepalived.unicast_peers[0]" && f.Base == "vrrp6" {
			bad = f
		}
	}
	if _, err := config.Parse("/etc/vipproxy/vipproxy.toml", []byte(bad.Config("2001:db8::2"+testconfig.Injection))); err == nil {
		t.Errorf("check accepts the injected peer")
	}
}

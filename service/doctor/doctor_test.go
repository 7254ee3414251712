package doctor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/service/config"
)

func testConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse("test.toml", []byte("[vip]\naddresses = [\"192.0.2.10\"]\n[[backend]]\naddress = \"127.0.0.1:1\"\n[network]\nuplinks = [\"eth0\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// The keepalived check fails with the fix for each way keepalived ignores
// or undoes vipproxy: an empty keepalived.conf (Debian), no track script
// (conf.d not included), an IPVS virtual_server for the VIP.
func TestKeepalivedCheck(t *testing.T) {
	cfg := testConfig(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "keepalived.conf")
	h := Host{KeepalivedConf: conf}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	track := "vrrp_script vipproxy_probe {\n script \"vipproxy probe\"\n}\nvrrp_instance vipproxy {\n track_script {\n  vipproxy_probe\n }\n}\n"
	for _, tc := range []struct {
		name, main, included, want string
		status                     Status
	}{
		{"missing", "", "", "is missing or empty", Fail},
		{"no include", "global_defs {\n}\n", track, "has no vrrp_script vipproxy_probe", Fail},
		{"ipvs", "include conf.d/*.conf\nvirtual_server 192.0.2.10 6443 {\n}\n", track, "balances the VIP", Fail},
		{"good", "include conf.d/*.conf\n", track, "tracks vipproxy_probe", Pass},
	} {
		os.Remove(conf)
		if tc.main != "" {
			write("keepalived.conf", tc.main)
		}
		os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755)
		write("conf.d/vipproxy.conf", tc.included)
		r := checkKeepalived(context.Background(), h, cfg)
		if r.Status != tc.status || !strings.Contains(r.Detail, tc.want) || (r.Status == Fail) != (r.Fix != "") {
			t.Errorf("%s: %+v; want %s with %q", tc.name, r, tc.status, tc.want)
		}
	}
}

func TestRunOnlyAndUnknown(t *testing.T) {
	cfg := testConfig(t)
	if _, err := Run(context.Background(), Host{}, cfg, []string{"vip-prot"}); err == nil || !strings.Contains(err.Error(), "vip-port") {
		t.Errorf("unknown check: %v", err)
	}
	rs, err := Run(context.Background(), Host{Proc: "/proc"}, cfg, []string{"vip-link"})
	if err != nil || len(rs) != 1 || rs[0].Check != "vip-link" || rs[0].Status != Skip || Failed(rs) {
		t.Errorf("--only vip-link without netlink: %+v, %v", rs, err)
	}
}

// A backend on this host's own address and the VIP port that refuses is
// this node's apiserver: the fix names the likely cause.
func TestBackendsLocalApiserverDown(t *testing.T) {
	cfg := testConfig(t)
	cfg.VIP.Port = 1 // nothing listens on 127.0.0.1:1
	r := checkBackends(context.Background(), Host{DialTimeout: time.Second}, cfg)
	if r.Status != Fail || !strings.Contains(r.Fix, "this node's own apiserver is down") {
		t.Errorf("%+v", r)
	}
}

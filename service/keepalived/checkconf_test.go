package keepalived

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/service/config"
)

func TestCheckConf(t *testing.T) {
	cfg, err := config.Parse("t.toml", []byte("[vip]\naddresses = [\"10.0.0.10\", \"2001:db8::10\"]\n[[backend]]\naddress = \"10.0.0.1:6443\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	vrrp := "vrrp_instance vipproxy {\n  state BACKUP\n  virtual_ipaddress {\n    10.0.0.10/32\n  }\n}\n"
	for _, tc := range []struct {
		name, conf, wantErr string
	}{
		{"vrrp only", vrrp, ""},
		{"other port", vrrp + "virtual_server 10.0.0.10 443 {\n  real_server 10.0.0.1 443 {\n  }\n}\n", ""},
		{"other ip", "virtual_server 10.0.0.99 6443 {\n}\n", ""},
		{"commented out", "# virtual_server 10.0.0.10 6443 {\n! virtual_server 10.0.0.10 6443 {\n", ""},
		{"vip", vrrp + "virtual_server 10.0.0.10 6443 {\n  lb_algo rr\n}\n", ":7: virtual_server 10.0.0.10 6443 is the vipproxy VIP listener"},
		{"ipv6 vip", "virtual_server 2001:db8::10 6443 {\n}\n", ":1: virtual_server 2001:db8::10 6443"},
		{"group", "virtual_server_group k8s {\n  10.0.0.10 6443\n}\nvirtual_server group k8s {\n}\n", ":2: virtual_server_group entry 10.0.0.10 6443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "keepalived.conf")
			if err := os.WriteFile(path, []byte(tc.conf), 0o644); err != nil {
				t.Fatal(err)
			}
			err := CheckConf(cfg, path)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("CheckConf: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), path+tc.wantErr)):
				t.Fatalf("CheckConf = %v; want %s%s", err, path, tc.wantErr)
			}
		})
	}
	if err := CheckConf(cfg, filepath.Join(t.TempDir(), "missing.conf")); err == nil {
		t.Fatal("a missing file must be an error")
	}
}

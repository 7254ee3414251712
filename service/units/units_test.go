package units

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/internal/testutil/testconfig"
)

func TestSocketDropInGolden(t *testing.T) {
	cases := map[string][]string{
		"ipv4":       {`[vip]`, `addresses = ["10.0.0.100"]`},
		"dual-stack": {`[vip]`, `addresses = ["10.0.0.100", "2001:db8:1::100"]`, `port = 443`},
	}
	for name, lines := range cases {
		t.Run(name, func(t *testing.T) {
			f := SocketDropIn(testconfig.Parse(t, append(lines, `[network]`, `uplinks = ["eth0"]`, `[[backend]]`, `address = "192.0.2.1:6443"`)...), "/root-dir")
			if f.Path != "/root-dir/etc/systemd/system/vipproxy.socket.d/50-listen.conf" {
				t.Errorf("path %s", f.Path)
			}
			testutil.Golden(t, filepath.Join("testdata/golden", name+".conf"), f.Data)
			// systemd's own syntax, read back: the reset comes first.
			opts, err := unit.DeserializeOptions(strings.NewReader(string(f.Data)))
			if err != nil || len(opts) < 2 || opts[0].Name != "ListenStream" || opts[0].Value != "" {
				t.Errorf("deserialized %v, %v: want an empty ListenStream= first", opts, err)
			}
		})
	}
}

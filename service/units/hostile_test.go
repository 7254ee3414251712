package units

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/internal/testutil/testconfig"
	"github.com/vipproxy/vipproxy/service/config"
)

// TestAcceptedHostileValuesPassSystemdAnalyze renders the socket drop-ins
// of every value that check accepts out of the hostile ones tried in each
// field (config's TestHostileRenderedValuesRefused refuses the others) and
// runs systemd's own parser on the shipped socket unit with them
// (systemd-analyze verify, which reads a unit's drop-ins beside it):
// no warning, as systemd/verify-units.sh wants of the shipped units.
func TestAcceptedHostileValuesPassSystemdAnalyze(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("no systemd-analyze (apt-get install systemd; make deps installs it)")
	}
	// The shipped socket and its service; verify wants the binaries the
	// units run to exist.
	shipped := map[string]string{}
	for _, name := range []string{"vipproxy.socket", "vipproxy.service"} {
		data, err := os.ReadFile(filepath.Join("../../systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		shipped[name] = strings.ReplaceAll(string(data), "/usr/bin/vipproxy", "/bin/true")
	}
	seen := 0
	for a := range testconfig.Distinct(nil, func(cfg *config.Valid) []byte {
		f := Sockets(cfg, "/")[0]
		return []byte(f.Path + "\x00" + string(f.Data))
	}) {
		seen++
		f, v := a.Field, a.Value
		files := Sockets(a.Config, "/")
		dir := t.TempDir()
		testutil.WriteFile(t, dir, filepath.Join("vipproxy.socket.d", filepath.Base(files[0].Path)), string(files[0].Data))
		for name, data := range shipped {
			testutil.WriteFile(t, dir, name, data)
		}
		cmd := exec.Command("systemd-analyze", "verify", "--man=no", "./vipproxy.socket")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("%s = %.80q passes check, systemd-analyze verify complains: %v\n%s\n%s", f.Key, v, err, out, files[0].Data)
		}
	}
	if seen < 10 {
		t.Errorf("only %d distinct drop-ins rendered; the test needs the hostile values check accepts", seen)
	}
	t.Logf("systemd-analyze verify passed %d distinct drop-ins", seen)
}

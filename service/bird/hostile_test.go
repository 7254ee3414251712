package bird

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/internal/testutil/testconfig"
	"github.com/vipproxy/vipproxy/service/config"
)

// TestAcceptedHostileValuesPassBIRD renders every value that check accepts
// out of the hostile ones tried in each field (config's
// TestHostileRenderedValuesRefused refuses the others) and runs BIRD's own
// parser (bird -p) on it, included from Debian's main file.
func TestAcceptedHostileValuesPassBIRD(t *testing.T) {
	birdBin, err := exec.LookPath("bird")
	if err != nil {
		t.Skip("no bird binary (apt-get install bird2; make deps installs it)")
	}
	dir := t.TempDir()
	snippet := filepath.Join(dir, "vipproxy.conf")
	main := filepath.Join(dir, "bird.conf")
	if err := os.WriteFile(main, []byte(strings.ReplaceAll(debianMain, "%s", snippet)), 0o644); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for a := range testconfig.Distinct(func(cfg *config.Valid) bool { return cfg.VIP.Mode.UsesBGP() }, Render) {
		seen++
		f, v, data := a.Field, a.Value, a.Data
		if err := os.WriteFile(snippet, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(birdBin, "-p", "-c", main).CombinedOutput(); err != nil {
			t.Errorf("%s = %.80q passes check, bird -p refuses it: %v\n%s\n%s", f.Key, v, err, out, data)
		}
	}
	if seen < 20 {
		t.Errorf("only %d distinct files rendered; the test needs the hostile values check accepts", seen)
	}
	t.Logf("bird -p passed %d distinct files", seen)
}

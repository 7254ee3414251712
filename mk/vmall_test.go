package mk

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestVMTestAllInstallsThePackageOnEveryArchitecture: make vm-test-all
// boots every architecture's Debian with the full scenario and the .deb
// test (vm-tests/package.py), since the package is built per architecture;
// the scripts named on the command line run there too. Read from what make
// would run (make -n), not from the VMs.
func TestVMTestAllInstallsThePackageOnEveryArchitecture(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	for _, tc := range []struct{ args, want []string }{
		{nil, []string{"vm-tests/scenario.py", "vm-tests/smoke.py", "vm-tests/package.py"}},
		{[]string{"VM_SCRIPTS=vm-tests/smoke.py"}, []string{"vm-tests/smoke.py", "vm-tests/package.py"}},
	} {
		cmd := exec.Command("make", append([]string{"-C", "..", "-n", "--no-print-directory", "vm-test-all", "VM_ARCHS=amd64 arm64 riscv64"}, tc.args...)...)
		cmd.Env = withoutMakeVars(os.Environ())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n vm-test-all %v: %v\n%s", tc.args, err, out)
		}
		runs := regexp.MustCompile(`vm-tests/run\.sh (\S+) (.*)`).FindAllStringSubmatch(string(out), -1)
		got := map[string]string{}
		for _, r := range runs {
			got[r[1]] = strings.TrimSpace(r[2])
		}
		for _, arch := range []string{"amd64", "arm64", "riscv64"} {
			if want := strings.Join(tc.want, " "); got[arch] != want {
				t.Errorf("make vm-test-all %v runs on %s: %q, want %q\n%s", tc.args, arch, got[arch], want, out)
			}
		}
	}
}

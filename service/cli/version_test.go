package cli

import (
	"os/exec"
	"runtime"
	"testing"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// TestVersionNamesVersionCommitGoAndArchitecture: `vipproxy version` and
// `--version` print what the build set (the Makefile: git describe and
// the commit), the Go version and the architecture; a build that was told
// nothing and read no git metadata says so instead of a made-up version.
func TestVersionNamesVersionCommitGoAndArchitecture(t *testing.T) {
	goArch := "go: " + runtime.Version() + "\narch: " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"-ldflags", "-X main.version=v1.2.3-4-gabcdef0 -X main.commit=abcdef0123456789"},
			"vipproxy v1.2.3-4-gabcdef0\ncommit: abcdef0123456789\n" + goArch},
		{[]string{"-buildvcs=false"},
			"vipproxy version unknown (built without git metadata)\ncommit: unknown\n" + goArch},
	} {
		bin := testutil.Build(t, "github.com/vipproxy/vipproxy/cmd/vipproxy", tc.flags...)
		for _, arg := range []string{"version", "--version"} {
			out, err := exec.Command(bin, arg).CombinedOutput()
			if err != nil || string(out) != tc.want {
				t.Errorf("built with %v, vipproxy %s: %v\n%s\nwant\n%s", tc.flags, arg, err, out, tc.want)
			}
		}
	}
}

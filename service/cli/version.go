package cli

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// unknownVersion is the version of a build that was told none and has no
// version control metadata to read it from.
const unknownVersion = "unknown"

// BuildVersion returns the version and commit of this binary: those the
// build set (version from `git describe` or a release's VERSION file,
// commit from git, with -ldflags -X, see the Makefile), else what the Go
// toolchain recorded from git (the module's version, vcs.revision), else
// unknownVersion and "".
func BuildVersion(version, commit string) (string, string) {
	if info, ok := debug.ReadBuildInfo(); ok {
		if version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			version = info.Main.Version
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && commit == "" {
				commit = s.Value
			}
		}
	}
	if version == "" {
		version = unknownVersion
	}
	return version, commit
}

// runVersion prints the version, the commit, the Go version and the
// architecture. It parses its arguments as every command does (--config
// is taken and unused, as every command takes it), so --help prints usage
// and a wrong flag exits 2.
func runVersion(_ context.Context, env Env, args []string) int {
	var path string
	if code, ok := parseFlags(env, newFlags(env, "version", &path), args); !ok {
		return code
	}
	version, commit := env.Version, env.Commit
	if version == "" || version == unknownVersion {
		version = "version unknown (built without git metadata)"
	}
	if commit == "" {
		commit = unknownVersion
	}
	fmt.Fprintf(env.Stdout, "vipproxy %s\ncommit: %s\ngo: %s\narch: %s/%s\n", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return ExitOK
}

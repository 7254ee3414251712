package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestBashCompletesCommandsFlagsAndValues loads what `vipproxy completion
// bash` prints into bash, as bash-completion does, and asks it what it
// completes, as the shell does on TAB: COMP_WORDS and COMP_CWORD, then the
// function `complete -p` names.
func TestBashCompletesCommandsFlagsAndValues(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	script, stderr, code := runBin(t, "completion", "bash")
	if code != 0 || stderr != "" {
		t.Fatalf("vipproxy completion bash: exit %d, stderr %q", code, stderr)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "vipproxy.bash")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "vipproxy.toml"), nil, 0o644)
	for _, tc := range []struct {
		line string // the words so far; the last is completed
		want string // COMPREPLY, sorted
	}{
		{"vipproxy ne", "network"},
		{"vipproxy ", strings.Join(slices.Sorted(slices.Values(append(strings.Fields(commandNames()), "--help", "--version"))), " ")},
		{"vipproxy keepalived ", "--help render write"},
		{"vipproxy network apply --d", "--diff"},
		{"vipproxy keepalived write --", "--config --diff --help --out"},
		{"vipproxy doctor --only vip-", "vip-answers vip-link vip-port"},
		{"vipproxy check --config " + dir + "/vipproxy.t", dir + "/vipproxy.toml"},
		{"vipproxy probe --timeout ", ""},
		{"vipproxy help network a", "apply"},
	} {
		words := strings.Split(tc.line, " ")
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + w + "'"
		}
		prog := "source " + file + "\nset -- $(complete -p vipproxy)\nfn=${@: -2:1}\n" +
			"COMP_WORDS=(" + strings.Join(quoted, " ") + ")\nCOMP_CWORD=" + strconv.Itoa(len(words)-1) + "\n" +
			"$fn vipproxy\nprintf '%s\\n' \"${COMPREPLY[@]}\" | sort | paste -sd ' '\n"
		bash := exec.Command("bash", "--norc", "--noprofile", "-c", prog)
		bash.Env = append(os.Environ(), "LC_ALL=C")
		out, err := bash.CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != tc.want {
			t.Errorf("bash completes %q to %q (%v), want %q", tc.line, got, err, tc.want)
		}
	}
}

// TestZshCompletionParses: zsh reads what `vipproxy completion zsh`
// prints (its syntax) and defines the completion function.
func TestZshCompletionParses(t *testing.T) {
	if _, err := exec.LookPath("zsh"); err != nil {
		t.Skip("no zsh (make deps installs it)")
	}
	script, _, code := runBin(t, "completion", "zsh")
	if code != 0 || !strings.HasPrefix(script, "#compdef vipproxy\n") {
		t.Fatalf("vipproxy completion zsh: exit %d:\n%s", code, script)
	}
	file := filepath.Join(t.TempDir(), "_vipproxy")
	if err := os.WriteFile(file, []byte(strings.Replace(script, "\n_vipproxy \"$@\"\n", "\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("zsh", "-n", file).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v\n%s", err, out)
	}
	out, err := exec.Command("zsh", "-f", "-c", "source "+file+" && whence -w _vipproxy _vipproxy_subs && _vipproxy_subs network && print -l $subs").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "_vipproxy: function") || !strings.Contains(string(out), "apply:write the networkd drop-ins") {
		t.Errorf("zsh: %v\n%s", err, out)
	}
}

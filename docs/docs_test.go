// Package docs holds the operator documentation; its tests keep the README a
// front door and every link between the documents pointing somewhere real.
package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/vipproxy/vipproxy/service/config"
)

// maxReadmeLines keeps README.md a front door: what vipproxy is, how to
// install it and where to read on; reference material belongs in docs/*.md.
const maxReadmeLines = 150

// documents are the Markdown files an operator reads, relative to docs/:
// the README, the changelog, docs/*.md and those under examples/,
// monitoring/, vm-tests/ and k8s-tests/.
func documents(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, pattern := range []string{"../*.md", "*.md", "../examples/*.md", "../monitoring/*.md", "../vm-tests/*.md", "../k8s-tests/*.md"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	if len(out) < 3 {
		t.Fatalf("found only %v", out)
	}
	return out
}

func TestReadmeIsAFrontDoor(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, at most %d: move reference material to docs/", n, maxReadmeLines)
	}
	// vm-tests/quickstart.py runs this block verbatim.
	quickstart := regexp.MustCompile("(?s)<!-- quickstart -->\\s*```sh\n.*?```\\s*<!-- end quickstart -->")
	if !quickstart.Match(b) {
		t.Error("README.md lost its <!-- quickstart --> sh block (vm-tests/quickstart.py reads it)")
	}
	for _, make := range []string{"make demo", "make test"} {
		if !strings.Contains(string(b), make) {
			t.Errorf("README.md does not name %q, one of the two commands", make)
		}
	}
}

var (
	linkRE  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	fenceRE = regexp.MustCompile("(?ms)^```.*?^```")
)

// TestLinksResolve: every relative link names a file that exists and, with
// a #fragment, a heading of that file.
func TestLinksResolve(t *testing.T) {
	for _, doc := range documents(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := fenceRE.ReplaceAllString(string(b), "")
		for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
			checkLink(t, doc, m[1])
		}
	}
}

func checkLink(t *testing.T, doc, link string) {
	t.Helper()
	if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
		return
	}
	target, fragment, _ := strings.Cut(link, "#")
	path := doc
	if target != "" {
		path = filepath.Join(filepath.Dir(doc), target)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("%s: link %q: %v", doc, link, err)
		return
	}
	if fragment == "" {
		return
	}
	if !anchors(headings(t, path))[fragment] {
		t.Errorf("%s: link %q: %s has no heading with the anchor #%s", doc, link, path, fragment)
	}
}

var headingRE = regexp.MustCompile(`(?m)^#+ (.+)$`)

func headings(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range headingRE.FindAllStringSubmatch(fenceRE.ReplaceAllString(string(b), ""), -1) {
		out = append(out, m[1])
	}
	return out
}

// anchors maps each heading to its GitHub anchor: lower case, punctuation
// dropped, spaces to hyphens, and a repeated anchor numbered -1, -2...
func anchors(headings []string) map[string]bool {
	set := map[string]bool{}
	seen := map[string]int{}
	for _, h := range headings {
		a := anchor(h)
		if n := seen[a]; n > 0 {
			set[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			set[a] = true
		}
		seen[a]++
	}
	return set
}

func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimRight(heading, " #")) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var exampleRE = regexp.MustCompile("(?s)<!-- example: (\\S+) -->\n```toml\n(.*?)```\n<!-- end example -->")

// TestExamplesShownAsTheyAre: a config shown in the docs as one of
// examples/ (between <!-- example: FILE --> markers) is that file byte for
// byte, so what a reader copies is what the tests run; and every
// distribution example is shown.
func TestExamplesShownAsTheyAre(t *testing.T) {
	shown := map[string]bool{}
	for _, doc := range documents(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range exampleRE.FindAllStringSubmatch(string(b), -1) {
			want, err := os.ReadFile(filepath.Join("..", m[1]))
			if err != nil {
				t.Errorf("%s shows %s: %v", doc, m[1], err)
				continue
			}
			if m[2] != string(want) {
				t.Errorf("%s shows %s, but not as the file is: copy the file into the block", doc, m[1])
			}
			shown[m[1]] = true
		}
	}
	for _, name := range []string{"kubeadm", "k3s", "rke2", "k0s", "node-local"} {
		if f := "examples/" + name + ".toml"; !shown[f] {
			t.Errorf("no document shows %s", f)
		}
	}
}

// TestConfigurationExamplesParse: every TOML block of configuration.md is
// a config `vipproxy check` accepts, so the reference cannot drift from
// the rules.
func TestConfigurationExamplesParse(t *testing.T) {
	b, err := os.ReadFile("configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```toml\n(.*?)```").FindAllStringSubmatch(string(b), -1)
	if len(blocks) == 0 {
		t.Fatal("configuration.md has no toml example")
	}
	for i, m := range blocks {
		if _, err := config.Parse(fmt.Sprintf("configuration.md-block-%d.toml", i+1), []byte(m[1])); err != nil {
			t.Errorf("%v", err)
		}
	}
}

// wildcardPorts are ports a distribution's own daemons hold on every
// address of a node once its recipe in distributions.md is applied, so
// vipproxy cannot bind them on the VIP there. k0s starts konnectivity-server
// with --agent-port=8132 and no --agent-bind-address, which binds every
// address (k0sproject/k0s pkg/component/controller/konnectivity.go;
// apiserver-network-proxy cmd/server/app/options/options.go), and has no
// setting to change that.
var wildcardPorts = map[string][]uint16{
	"k0s": {8132},
}

// TestExamplesAvoidWildcardPorts: no distribution example serves on the
// VIP a port its distribution holds on every address, and the k0s recipe
// sends the konnectivity agents to the VIP port the example serves.
func TestExamplesAvoidWildcardPorts(t *testing.T) {
	for dist, held := range wildcardPorts {
		file := filepath.Join("..", "examples", dist+".toml")
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Parse(file, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range cfg.ServedPorts() {
			for _, h := range held {
				if p.Port == h {
					t.Errorf("%s: port %q serves VIP:%d, which %s holds on every address: serve another VIP port with backend_port = %d", file, p.Name, h, dist, h)
				}
			}
		}
	}
	b, err := os.ReadFile(filepath.Join("..", "examples", "k0s.toml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("k0s.toml", b)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("distributions.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range cfg.ServedPorts() {
		if p.Name != "konnectivity" {
			continue
		}
		want := fmt.Sprintf("`spec.konnectivity.externalAddress:\n  192.0.2.10:%d`", p.Port)
		if !strings.Contains(string(doc), want) {
			t.Errorf("distributions.md: the k0s recipe does not send the konnectivity agents to VIP:%d (%s)", p.Port, want)
		}
		return
	}
	t.Error("examples/k0s.toml has no port named konnectivity")
}

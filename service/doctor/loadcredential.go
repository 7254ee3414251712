package doctor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"
)

// unitDirs are where systemd looks for units, in its order of precedence.
func unitDirs() []string {
	return []string{"etc/systemd/system", "run/systemd/system", "usr/local/lib/systemd/system", "usr/lib/systemd/system", "lib/systemd/system"}
}

// credstoreDirs are where LoadCredential=NAME (no source, or a relative
// one) is looked for.
func credstoreDirs() []string {
	return []string{"etc/credstore", "run/credstore", "usr/lib/credstore"}
}

// serviceCredentials maps each credential NAME vipproxy.service gets to
// its SOURCE under h.Root, from its unit and drop-ins: as systemd has them
// (systemctl cat), else as the files under h.Root are. from says where.
func serviceCredentials(ctx context.Context, h Host) (sources map[string]string, from string, err error) {
	var text string
	if h.Systemctl != nil {
		text, err = h.Systemctl(ctx, "cat", "vipproxy.service")
		from = "systemctl cat vipproxy.service"
	} else {
		var files []string
		text, files, err = unitText(h.Root, "vipproxy.service")
		from = strings.Join(files, ", ")
	}
	if err != nil {
		return nil, "", err
	}
	opts, err := unit.DeserializeOptions(strings.NewReader(text))
	if err != nil {
		return nil, "", fmt.Errorf("parse %s: %w", from, err)
	}
	sources = map[string]string{}
	for _, o := range opts {
		if o.Section != "Service" || o.Name != "LoadCredential" {
			continue
		}
		if o.Value == "" { // an empty assignment resets the list
			clear(sources)
			continue
		}
		name, src, _ := strings.Cut(o.Value, ":")
		sources[name] = credentialSource(h.Root, name, src)
	}
	return sources, from, nil
}

// credentialSource is the file LoadCredential=NAME:SRC copies, under
// root: SRC when absolute, else the first of the credential stores
// holding SRC (NAME without one).
func credentialSource(root, name, src string) string {
	if src == "" {
		src = name
	}
	if filepath.IsAbs(src) {
		return filepath.Join(root, src)
	}
	for _, d := range credstoreDirs() {
		if p := filepath.Join(root, d, src); exists(p) {
			return p
		}
	}
	return filepath.Join(root, credstoreDirs()[0], src)
}

// unitText is the unit file name and its drop-ins (NAME.d/*.conf, one of
// each file name, the directory first in unitDirs winning) under root,
// joined in the order systemd reads them, and the files read.
func unitText(root, name string) (string, []string, error) {
	var files []string
	for _, d := range unitDirs() {
		if p := filepath.Join(root, d, name); exists(p) {
			files = append(files, p)
			break
		}
	}
	if len(files) == 0 {
		return "", nil, fmt.Errorf("no %s under %s (%s)", name, root, strings.Join(unitDirs(), ", "))
	}
	dropIns := map[string]string{}
	for _, d := range unitDirs() {
		matches, _ := filepath.Glob(filepath.Join(root, d, name+".d", "*.conf"))
		for _, m := range matches {
			if _, ok := dropIns[filepath.Base(m)]; !ok {
				dropIns[filepath.Base(m)] = m
			}
		}
	}
	bases := make([]string, 0, len(dropIns))
	for b := range dropIns {
		bases = append(bases, b)
	}
	slices.Sort(bases)
	for _, b := range bases {
		files = append(files, dropIns[b])
	}
	var text strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", nil, err
		}
		text.Write(data)
		text.WriteString("\n")
	}
	return text.String(), files, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

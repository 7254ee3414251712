// Command mangen writes vipproxy's man pages: vipproxy(8) from the
// command table that --help prints (service/cli), and vipproxy.toml(5)
// from docs/configuration.md, the configuration reference. With
// --operations it writes the command list of docs/operations.md instead,
// with --completion the shell completions. `make man` and `make
// completion` run it from the top of the tree.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vipproxy/vipproxy/internal/manpage"
	"github.com/vipproxy/vipproxy/service/cli"
	"github.com/vipproxy/vipproxy/service/config"
)

func main() {
	out := flag.String("out", "bin/man", "the directory to write vipproxy.8 and vipproxy.toml.5 to")
	version := flag.String("version", "", "the version the pages name (the Makefile's VERSION)")
	docs := flag.String("docs", "docs", "the directory of configuration.md")
	operations := flag.String("operations", "", "rewrite the command list of this file (docs/operations.md) and nothing else")
	completion := flag.String("completion", "", "write the shell completions to this directory (vipproxy for bash, _vipproxy for zsh) and nothing else")
	flag.Parse()
	if *version == "" {
		*version, _ = cli.BuildVersion("", "")
	}
	var err error
	switch {
	case *operations != "":
		err = rewriteCommandList(*operations)
	case *completion != "":
		err = writeCompletions(*completion)
	default:
		err = writePages(*out, *docs, *version)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mangen: %v\n", err)
		os.Exit(1)
	}
}

func writePages(out, docs, version string) error {
	md, err := os.ReadFile(filepath.Join(docs, "configuration.md"))
	if err != nil {
		return fmt.Errorf("read the configuration reference: %w", err)
	}
	var cmd, file bytes.Buffer
	writeManPage(&cmd, version)
	writeConfigPage(&file, string(md), version)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "vipproxy.8"), cmd.Bytes(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "vipproxy.toml.5"), file.Bytes(), 0o644)
}

// writeConfigPage writes vipproxy.toml(5): configuration.md as a man page.
func writeConfigPage(w *bytes.Buffer, md, version string) {
	manpage.Head(w, "vipproxy.toml", 5, version, "File Formats", "configuration of vipproxy")
	fmt.Fprintf(w, ".SH SYNOPSIS\n.I %s\n.SH DESCRIPTION\n", config.DefaultPath)
	manpage.FromMarkdown(w, md)
	fmt.Fprint(w, ".SH SEE ALSO\n.BR vipproxy (8)\n")
}

// writeCompletions writes what `vipproxy completion bash` and `zsh`
// print to dir, named as bash-completion and zsh look for them.
func writeCompletions(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for shell, name := range map[string]string{"bash": "vipproxy", "zsh": "_vipproxy"} {
		var out, errOut bytes.Buffer
		if code := cli.Main(context.Background(), cli.Env{Stdout: &out, Stderr: &errOut}, []string{"completion", shell}); code != cli.ExitOK {
			return fmt.Errorf("vipproxy completion %s: exit %d: %s", shell, code, errOut.String())
		}
		if err := os.WriteFile(filepath.Join(dir, name), out.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// rewriteCommandList replaces what is between the file's command list
// markers with the list the command table gives.
func rewriteCommandList(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	start, end := strings.Index(string(b), commandListStart), strings.Index(string(b), commandListEnd)
	if start < 0 || end < start {
		return fmt.Errorf("%s: no %s ... %s markers", path, commandListStart, commandListEnd)
	}
	var list bytes.Buffer
	writeCommandList(&list)
	text := string(b[:start]) + commandListStart + "\n" + list.String() + string(b[end:])
	return os.WriteFile(path, []byte(text), 0o644)
}

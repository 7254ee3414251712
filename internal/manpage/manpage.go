// Package manpage writes man pages in roff with the man(7) macros: text
// escaped for roff, and the subset of Markdown the docs are written in
// (headings, paragraphs, lists, code blocks, tables, inline code, bold,
// italics and links) turned into a page's sections.
package manpage

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Head writes the page's .TH line and its NAME section.
func Head(w io.Writer, name string, section int, version, manual, what string) {
	fmt.Fprintf(w, ".TH %s %d \"\" %q %q\n", strings.ToUpper(Escape(name)), section, "vipproxy "+version, manual)
	// Left-aligned, no hyphenation: keys, paths and flags stay whole and
	// copyable, and a long one never leaves a line groff cannot adjust.
	fmt.Fprint(w, ".ad l\n.nh\n")
	fmt.Fprintf(w, ".SH NAME\n%s \\- %s\n", Escape(name), Escape(what))
}

// Escape makes plain text safe in roff: backslashes print as such, a
// leading period or apostrophe is not taken for a request, a line may
// break after a comma in a list without spaces (a,b,c), and every
// character beyond ASCII is written as its groff escape.
func Escape(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\e`)
		case r == ',' && i+1 < len(s) && s[i+1] != ' ':
			b.WriteString(`,\:`)
		case r > 127:
			fmt.Fprintf(&b, `\[u%04X]`, r)
		default:
			b.WriteRune(r)
		}
	}
	out := b.String()
	if strings.HasPrefix(out, ".") || strings.HasPrefix(out, "'") {
		out = `\&` + out
	}
	return out
}

// Code is text typed as it is (a command, a flag, a path, a key): bold,
// with every hyphen a minus sign so that a copied option works.
func Code(s string) string {
	return `\fB` + strings.ReplaceAll(Escape(s), "-", `\-`) + `\fR`
}

var (
	codeRE   = regexp.MustCompile("`([^`]+)`")
	linkRE   = regexp.MustCompile(`\[([^\]]+)\]\([^)]+\)`)
	boldRE   = regexp.MustCompile(`\*\*([^*]+)\*\*`)
	italicRE = regexp.MustCompile(`\*([^*\s][^*]*)\*`)
	slotRE   = regexp.MustCompile("\x00([0-9]+)\x00")
)

// Inline turns one line of Markdown into roff text: `code`, **bold**,
// *italics*, and links shown as their text.
func Inline(md string) string {
	var codes []string
	md = codeRE.ReplaceAllStringFunc(md, func(m string) string {
		codes = append(codes, Code(strings.Trim(m, "`")))
		return fmt.Sprintf("\x00%d\x00", len(codes)-1)
	})
	md = linkRE.ReplaceAllString(md, "$1")
	s := Escape(md)
	s = boldRE.ReplaceAllString(s, `\fB$1\fR`)
	s = italicRE.ReplaceAllString(s, `\fI$1\fR`)
	return slotRE.ReplaceAllStringFunc(s, func(m string) string {
		var i int
		fmt.Sscanf(strings.Trim(m, "\x00"), "%d", &i)
		return codes[i]
	})
}

// FromMarkdown writes a Markdown document as sections of a man page: its
// first heading (the title) is left out, ## starts a section, ### a
// subsection; a table becomes one tagged paragraph per row.
func FromMarkdown(w io.Writer, md string) {
	var para []string // the paragraph or list item so far
	inList, inCode := false, false
	flush := func() {
		if len(para) > 0 && inList {
			fmt.Fprintf(w, ".IP \\(bu 2\n%s\n", Inline(strings.Join(para, " ")))
		} else if len(para) > 0 {
			fmt.Fprintf(w, ".PP\n%s\n", Inline(strings.Join(para, " ")))
		}
		para = nil
	}
	var table [][]string
	sc := bufio.NewScanner(strings.NewReader(md))
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case inCode:
			if strings.HasPrefix(trimmed, "```") {
				fmt.Fprint(w, ".fi\n.RE\n")
				inCode = false
			} else {
				fmt.Fprintf(w, "%s\n", Escape(line))
			}
			continue
		case strings.HasPrefix(trimmed, "|"):
			flush()
			table = append(table, cells(trimmed))
			continue
		case len(table) > 0:
			writeTable(w, table)
			table = nil
		}
		switch {
		case strings.HasPrefix(trimmed, "```"):
			flush()
			inList = false
			fmt.Fprint(w, ".PP\n.RS 4\n.nf\n")
			inCode = true
		case strings.HasPrefix(trimmed, "<!--") || strings.HasPrefix(line, "# "):
		case strings.HasPrefix(line, "## "):
			flush()
			fmt.Fprintf(w, ".SH %q\n", strings.ToUpper(Inline(line[3:])))
			inList = false
		case strings.HasPrefix(line, "### "):
			flush()
			fmt.Fprintf(w, ".SS %q\n", Inline(line[4:]))
			inList = false
		case trimmed == "":
			flush()
			inList = false
		case strings.HasPrefix(line, "- "):
			flush()
			inList = true
			para = []string{line[2:]}
		default:
			para = append(para, trimmed)
		}
	}
	flush()
	if len(table) > 0 {
		writeTable(w, table)
	}
}

// cells splits a Markdown table row into its cells (`\|` is a | inside
// a cell).
func cells(row string) []string {
	row = strings.TrimSuffix(strings.TrimPrefix(row, "|"), "|")
	parts := strings.Split(strings.ReplaceAll(row, `\|`, "\x01"), "|")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(strings.TrimSpace(p), "\x01", "|")
	}
	return parts
}

// writeTable writes each row after the header as a tagged paragraph: the
// first cell, then the last, then the others after their header's word
// ("default 6443"), or as they are when they are in parentheses.
func writeTable(w io.Writer, rows [][]string) {
	head := rows[0]
	for _, row := range rows[1:] {
		if strings.Trim(strings.Join(row, ""), "-: ") == "" {
			continue // the |---|---| line
		}
		text := Inline(row[len(row)-1])
		for i := 1; i < len(row)-1 && i < len(head); i++ {
			if strings.HasPrefix(row[i], "(") { // "(required)"
				text += " " + Inline(row[i])
			} else {
				text += fmt.Sprintf(" (%s %s)", Escape(strings.ToLower(head[i])), Inline(row[i]))
			}
		}
		fmt.Fprintf(w, ".TP\n%s\n%s\n", Inline(row[0]), text)
	}
}

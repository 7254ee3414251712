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
	c := &converter{w: w}
	sc := bufio.NewScanner(strings.NewReader(md))
	for sc.Scan() {
		c.line(sc.Text())
	}
	c.flush()
	c.endTable()
}

// converter is FromMarkdown's state between lines.
type converter struct {
	w              io.Writer
	para           []string   // the paragraph or list item so far
	table          [][]string // the table's rows so far
	inList, inCode bool
}

func (c *converter) line(line string) {
	trimmed := strings.TrimSpace(line)
	switch {
	case c.inCode:
		c.codeLine(line)
		return
	case strings.HasPrefix(trimmed, "|"):
		c.flush()
		c.table = append(c.table, cells(trimmed))
		return
	}
	c.endTable()
	switch {
	case strings.HasPrefix(trimmed, "```"):
		c.flush()
		c.inList, c.inCode = false, true
		fmt.Fprint(c.w, ".PP\n.RS 4\n.nf\n")
	case strings.HasPrefix(trimmed, "<!--") || strings.HasPrefix(line, "# "):
	case strings.HasPrefix(line, "## "):
		c.flush()
		c.inList = false
		fmt.Fprintf(c.w, ".SH %q\n", strings.ToUpper(Inline(line[3:])))
	case strings.HasPrefix(line, "### "):
		c.flush()
		c.inList = false
		fmt.Fprintf(c.w, ".SS %q\n", Inline(line[4:]))
	case trimmed == "":
		c.flush()
		c.inList = false
	case strings.HasPrefix(line, "- "):
		c.flush()
		c.inList, c.para = true, []string{line[2:]}
	default:
		c.para = append(c.para, trimmed)
	}
}

// codeLine writes a line of a fenced code block as it is, or ends it.
func (c *converter) codeLine(line string) {
	if strings.HasPrefix(strings.TrimSpace(line), "```") {
		fmt.Fprint(c.w, ".fi\n.RE\n")
		c.inCode = false
		return
	}
	fmt.Fprintf(c.w, "%s\n", Escape(line))
}

// flush writes the paragraph or list item so far.
func (c *converter) flush() {
	switch {
	case len(c.para) > 0 && c.inList:
		fmt.Fprintf(c.w, ".IP \\(bu 2\n%s\n", Inline(strings.Join(c.para, " ")))
	case len(c.para) > 0:
		fmt.Fprintf(c.w, ".PP\n%s\n", Inline(strings.Join(c.para, " ")))
	}
	c.para = nil
}

// endTable writes the table so far.
func (c *converter) endTable() {
	if len(c.table) > 0 {
		writeTable(c.w, c.table)
		c.table = nil
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

package manpage

import (
	"bytes"
	"strings"
	"testing"
)

func TestInline(t *testing.T) {
	for _, tc := range []struct{ md, roff string }{
		{"plain text", "plain text"},
		{"`vip.port` is `6443`", `\fBvip.port\fR is \fB6443\fR`},
		{"run `vipproxy network apply --diff`", `run \fBvipproxy network apply \-\-diff\fR`},
		{"**bold** and *italics*", `\fBbold\fR and \fIitalics\fR`},
		{"see [bgp.md](bgp.md#how), now", "see bgp.md, now"},
		{".starts with a period", `\&.starts with a period`},
		{`a \ backslash`, `a \e backslash`},
		{"limit − limit/8 × 2", `limit \[u2212] limit/8 \[u00D7] 2`},
		{"checks: a,b,c", `checks: a,\:b,\:c`},
		{"`[[port]] name` *emph `code` inside*", `\fB[[port]] name\fR \fIemph \fBcode\fR inside\fR`},
	} {
		if got := Inline(tc.md); got != tc.roff {
			t.Errorf("Inline(%q) = %q, want %q", tc.md, got, tc.roff)
		}
	}
}

func TestFromMarkdown(t *testing.T) {
	md := "# Title\n\nOne paragraph\non two lines.\n\n| Key | Default | Meaning |\n|---|---|---|\n" +
		"| `vip.port` | `6443` | the port |\n| `vip.addresses` | (required) | the VIPs, `a\\|b` |\n\n" +
		"## Several ports\n\n- first item\n  continued\n- second\n\n```toml\n[vip]\n.dot = 1\n```\n<!-- a comment -->\n### Sub\ntext\n"
	var b bytes.Buffer
	FromMarkdown(&b, md)
	want := ".PP\nOne paragraph on two lines.\n" +
		".TP\n\\fBvip.port\\fR\nthe port (default \\fB6443\\fR)\n" +
		".TP\n\\fBvip.addresses\\fR\nthe VIPs, \\fBa|b\\fR (required)\n" +
		".SH \"SEVERAL PORTS\"\n" +
		".IP \\(bu 2\nfirst item continued\n.IP \\(bu 2\nsecond\n" +
		".PP\n.RS 4\n.nf\n[vip]\n\\&.dot = 1\n.fi\n.RE\n" +
		".SS \"Sub\"\n.PP\ntext\n"
	if b.String() != want {
		t.Errorf("FromMarkdown:\n%s\nwant\n%s", b.String(), want)
	}
	if strings.Contains(b.String(), "Title") {
		t.Error("the title heading is the page's name, not a section")
	}
}

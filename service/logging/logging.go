// Package logging makes the daemon's logger. Under systemd, when stderr is
// the journal, each line goes to journald with the priority of its level
// and its attributes as fields (`journalctl -u vipproxy -p warning`,
// `journalctl -u vipproxy BACKEND=cp2`); anywhere else it is slog's text.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/coreos/go-systemd/v22/journal"
)

// Identifier is SYSLOG_IDENTIFIER, what journalctl prints before the pid.
const Identifier = "vipproxy"

// New returns the logger for stderr. journalStream is $JOURNAL_STREAM:
// systemd sets it to the "device:inode" of the journal stream it connected
// to stdout and stderr. Only if stderr is still that stream does the
// logger speak journald's native protocol (a child with stderr redirected
// inherits the variable, so its presence alone proves nothing).
func New(stderr io.Writer, level slog.Leveler, journalStream string) *slog.Logger {
	if f, ok := stderr.(*os.File); ok && IsJournalStream(f, journalStream) {
		return slog.New(&journalHandler{level: level, send: journal.Send, fallback: &lockedWriter{w: f}})
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
}

// IsJournalStream reports whether f is the stream journalStream names.
func IsJournalStream(f *os.File, journalStream string) bool {
	var dev, ino uint64
	if _, err := fmt.Sscanf(journalStream, "%d:%d", &dev, &ino); err != nil {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && uint64(st.Dev) == dev && st.Ino == ino
}

// sendFunc is journal.Send; tests replace it.
type sendFunc func(message string, priority journal.Priority, vars map[string]string) error

// journalHandler sends each record as one journal entry: MESSAGE is the
// message and its attributes as key=value text (what journalctl shows),
// PRIORITY comes from the level, and every attribute is also a field of
// its own, upper-cased (backend -> BACKEND). journald stamps the time, so
// there is none in the entry.
type journalHandler struct {
	level    slog.Leveler
	send     sendFunc
	fallback io.Writer // stderr: the same journal, with a <N> priority prefix
	groups   []string  // from WithGroup
	attrs    []field   // from WithAttrs, groups applied
}

// field is one attribute: key is its journal field name, name what the
// message text shows (slog's dotted group.key).
type field struct{ key, name, value string }

func (h *journalHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level.Level()
}

func (h *journalHandler) Handle(_ context.Context, r slog.Record) error {
	fields := slices.Clip(h.attrs) // appending copies: h.attrs is shared
	r.Attrs(func(a slog.Attr) bool {
		fields = appendAttr(fields, h.groups, a)
		return true
	})
	var msg strings.Builder
	msg.WriteString(r.Message)
	vars := make(map[string]string, len(fields)+1)
	vars["SYSLOG_IDENTIFIER"] = Identifier
	for _, f := range fields {
		msg.WriteByte(' ')
		msg.WriteString(f.name)
		msg.WriteByte('=')
		msg.WriteString(quote(f.value))
		vars[f.key] = f.value
	}
	p := Priority(r.Level)
	if err := h.send(msg.String(), p, vars); err != nil {
		// journald went away or refused the entry: the stream still
		// carries the line, and its <N> prefix the priority.
		_, werr := fmt.Fprintf(h.fallback, "<%d>%s\n", p, strings.ReplaceAll(msg.String(), "\n", `\n`))
		return werr
	}
	return nil
}

func (h *journalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = slices.Clip(h.attrs)
	for _, a := range as {
		c.attrs = appendAttr(c.attrs, h.groups, a)
	}
	return &c
}

func (h *journalHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.groups = append(slices.Clip(h.groups), name)
	return &c
}

// appendAttr flattens a (possibly grouped) attribute into fields.
func appendAttr(fs []field, groups []string, a slog.Attr) []field {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		if a.Key != "" {
			groups = append(slices.Clip(groups), a.Key)
		}
		for _, g := range v.Group() {
			fs = appendAttr(fs, groups, g)
		}
		return fs
	}
	if a.Key == "" {
		return fs
	}
	path := append(slices.Clip(groups), a.Key)
	key := fieldName(strings.Join(path, "_"))
	switch key {
	case "MESSAGE", "PRIORITY", "SYSLOG_IDENTIFIER":
		key = "VIPPROXY_" + key // never overwrite the entry's own fields
	}
	return append(fs, field{key: key, name: strings.Join(path, "."), value: v.String()})
}

// fieldName makes a journal field name: upper-case letters, digits and
// '_', not starting with '_'.
func fieldName(key string) string {
	b := []byte(strings.ToUpper(key))
	for i, c := range b {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			b[i] = '_'
		}
	}
	name := strings.TrimLeft(string(b), "_")
	if name == "" {
		return "FIELD"
	}
	return name
}

// quote quotes a value as slog's text handler would: only if needed.
func quote(s string) string {
	if s == "" || strings.ContainsAny(s, " =\"\\") || strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}

// Priority is the syslog priority of a level: debug 7, info 6, warning 4,
// error 3.
func Priority(l slog.Level) journal.Priority {
	switch {
	case l >= slog.LevelError:
		return journal.PriErr
	case l >= slog.LevelWarn:
		return journal.PriWarning
	case l >= slog.LevelInfo:
		return journal.PriInfo
	}
	return journal.PriDebug
}

// lockedWriter keeps fallback lines whole when several goroutines log.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

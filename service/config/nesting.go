package config

import "fmt"

// maxNesting bounds how deep arrays and inline tables may nest, and the
// parts of a dotted key (each one a table level too). A config needs 2 or
// 3 levels; the TOML parser's memory grows with the square of the depth
// (a 36 KB file of nested inline tables took a reload from 12 MB to
// 1.5 GB; a 31 KB dotted key allocated 9.7 GB), which the 1 MiB size cap
// does not bound.
const maxNesting = 32

// checkNesting refuses data whose brackets nest deeper than maxNesting, or
// with a longer dotted key, before the parser sees it. It is a cheap scan that knows only what can
// hide a bracket: strings (basic, literal, multi-line) and comments. What
// else is wrong is left to the parser.
func checkNesting(name string, data []byte) error {
	s := scanner{src: data, line: 1}
	depth, dots := 0, 0
	for s.pos < len(data) {
		switch c := data[s.pos]; c {
		case '\n', '=', ',':
			if c == '\n' {
				s.line++
			}
			dots = 0
		case '#':
			s.skipComment()
			continue
		case '"', '\'':
			s.skipString(c) // a quoted key part: the dots around it count on
			continue
		case '.':
			if dots++; dots >= maxNesting {
				return &Error{File: name, Line: s.line, Reason: fmt.Sprintf("a dotted key of more than %d parts", maxNesting)}
			}
		case '[', '{':
			depth, dots = depth+1, 0
			if depth > maxNesting {
				return &Error{File: name, Line: s.line, Reason: fmt.Sprintf("arrays or inline tables nested deeper than %d levels", maxNesting)}
			}
		case ']', '}':
			depth, dots = max(depth-1, 0), 0
		}
		s.pos++
	}
	return nil
}

// scanner walks TOML source just well enough to skip strings and comments.
type scanner struct {
	src  []byte
	pos  int
	line int
}

func (s *scanner) skipComment() {
	for s.pos < len(s.src) && s.src[s.pos] != '\n' {
		s.pos++
	}
}

// skipString moves past the string starting at pos, quoted with q,
// counting the lines of a multi-line one.
func (s *scanner) skipString(q byte) {
	multi := s.pos+2 < len(s.src) && s.src[s.pos+1] == q && s.src[s.pos+2] == q
	if multi {
		s.pos += 3
	} else {
		s.pos++
	}
	for s.pos < len(s.src) {
		c := s.src[s.pos]
		switch {
		case c == '\\' && q == '"':
			s.pos += 2
			continue
		case c == '\n':
			if !multi {
				return // unterminated: the parser says so
			}
			s.line++
		case c == q && !multi:
			s.pos++
			return
		case c == q && s.pos+2 < len(s.src) && s.src[s.pos+1] == q && s.src[s.pos+2] == q:
			s.pos += 3
			return
		}
		s.pos++
	}
}

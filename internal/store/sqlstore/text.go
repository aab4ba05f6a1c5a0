package sqlstore

import (
	"strings"
	"unicode/utf8"
)

// text makes s storable in a TEXT column of both dialects. PostgreSQL
// refuses a NUL byte or invalid UTF-8 in text (SQLSTATE 22021), and one such
// value fails its whole statement: a usage batch with one client's bad model
// string would lose every other tenant's records. SQLite would store the
// bytes as they are, so the two stores would disagree. Every invalid byte
// sequence and every NUL becomes U+FFFD, on both, so the stored value shows
// that something was replaced.
func text(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// textArgs applies text to every string in args. It copies args only when
// a string changes, so the common case allocates nothing.
func textArgs(args []any) []any {
	var out []any
	for i, a := range args {
		v, ok := a.(string)
		if !ok {
			continue
		}
		if t := text(v); t != v {
			if out == nil {
				out = append([]any(nil), args...)
			}
			out[i] = t
		}
	}
	if out == nil {
		return args
	}
	return out
}

package sqlstore

import (
	"fmt"
	"strings"
	"time"
)

// Reading a catalog of 100,000 routes at start-up (issue 21), the SQLite
// driver's parse of every TIMESTAMP column was a large part of the load:
// it tries several layouts with time.Parse, allocating an error for each
// miss. A query that selects a column through timeText gets the stored
// text instead, which scanTime parses with parseStoredTime, an exact parser
// for the one layout the store writes.

// timeText is how a query selects the timestamp column col, keeping its
// name: as its stored text on SQLite (an expression has no declared type,
// so the driver leaves it as a string), as it is on PostgreSQL (whose
// driver reads a binary timestamp without parsing text).
func (s *DB) timeText(col string) string {
	if s.dialect == dialectPostgres {
		return col
	}
	return "CAST(" + col + " AS TEXT) AS " + col[strings.LastIndexByte(col, '.')+1:]
}

// scanTime scans a timestamp into a time.Time in UTC: from a time.Time
// (PostgreSQL, or SQLite's driver when it parsed the column) or from the
// stored text. Use it as (*scanTime)(&t).
type scanTime time.Time

// Scan implements sql.Scanner.
func (t *scanTime) Scan(src any) error {
	switch v := src.(type) {
	case time.Time:
		*t = scanTime(v.UTC())
		return nil
	case string:
		p, err := parseStoredTime(v)
		*t = scanTime(p)
		return err
	case []byte:
		p, err := parseStoredTime(string(v))
		*t = scanTime(p)
		return err
	}
	return fmt.Errorf("store: timestamp column holds %T", src)
}

// storedLayouts are the layouts SQLite's driver reads a timestamp in
// (modernc.org/sqlite's parseTimeFormats, with the form t.String() writes
// first), so that parseStoredTime reads whatever the driver would have.
var storedLayouts = []string{
	"2006-01-02 15:04:05.999999999 -0700 MST",
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02T15:04:05.999999999-07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04",
	"2006-01-02T15:04",
	"2006-01-02",
}

// parseStoredTime parses the text of a SQLite timestamp column into a
// time in UTC. The layout the store writes, "2006-01-02
// 15:04:05.999999999-07:00", is parsed without allocating; any other is
// parsed as the driver would.
func parseStoredTime(s string) (time.Time, error) {
	if t, ok := parseSQLiteTime(s); ok {
		return t, nil
	}
	if i := strings.Index(s, " m="); i > 0 { // t.String()'s monotonic reading
		s = s[:i]
	}
	ts, _ := strings.CutSuffix(strings.TrimSpace(s), "Z")
	for _, layout := range storedLayouts {
		if t, err := time.Parse(layout, ts); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("store: unreadable timestamp %q", s)
}

// parseSQLiteTime parses "YYYY-MM-DD HH:MM:SS[.fraction]±HH:MM" (one to
// nine digits of fraction) exactly as time.Parse does with that layout;
// false for anything else, or for a field out of range.
func parseSQLiteTime(s string) (time.Time, bool) {
	if len(s) < 25 || s[4] != '-' || s[7] != '-' || s[10] != ' ' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	year, ok1 := digits(s[0:4])
	month, ok2 := digits(s[5:7])
	day, ok3 := digits(s[8:10])
	hour, ok4 := digits(s[11:13])
	minute, ok5 := digits(s[14:16])
	sec, ok6 := digits(s[17:19])
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 {
		return time.Time{}, false
	}
	rest := s[19:]
	nsec := 0
	if rest[0] == '.' {
		n := 1
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if n == 1 || n > 10 {
			return time.Time{}, false
		}
		f, _ := digits(rest[1:n])
		for i := n; i < 10; i++ {
			f *= 10
		}
		nsec, rest = f, rest[n:]
	}
	if len(rest) != 6 || (rest[0] != '+' && rest[0] != '-') || rest[3] != ':' {
		return time.Time{}, false
	}
	oh, ok1 := digits(rest[1:3])
	om, ok2 := digits(rest[4:6])
	if !ok1 || !ok2 || oh > 24 || om > 59 || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
	if t.Day() != day { // past the month's end: time.Parse refuses it
		return time.Time{}, false
	}
	off := time.Duration(oh)*time.Hour + time.Duration(om)*time.Minute
	if rest[0] == '-' {
		off = -off
	}
	return t.Add(-off), true
}

// digits reads s, all ASCII digits, as a number.
func digits(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

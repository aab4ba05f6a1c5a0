package sqlstore

import (
	"testing"
	"time"
)

// TestParseStoredTime compares the store's parse of timestamp text with
// time.Parse's in the layouts SQLite's driver reads.
func TestParseStoredTime(t *testing.T) {
	const sqliteLayout = "2006-01-02 15:04:05.999999999-07:00"
	zones := []*time.Location{time.UTC, time.FixedZone("", 3600), time.FixedZone("", -(3*3600 + 30*60)), time.FixedZone("", 14*3600)}
	base := time.Date(2026, 12, 2, 4, 52, 7, 0, time.UTC)
	for _, z := range zones {
		for _, ns := range []int{0, 1, 100, 120000, 123456000, 999999999, 500000000} {
			for _, d := range []time.Duration{0, 24 * time.Hour * 90, -24 * time.Hour * 365 * 30} {
				in := base.Add(d).Add(time.Duration(ns)).In(z)
				text := in.Format(sqliteLayout)
				got, err := parseStoredTime(text)
				want, werr := time.Parse(sqliteLayout, text)
				if err != nil || werr != nil || !got.Equal(want) || got.Location() != time.UTC || !got.Equal(in) {
					t.Fatalf("%q: got %v (%v), time.Parse %v (%v)", text, got, err, want, werr)
				}
				if _, ok := parseSQLiteTime(text); !ok {
					t.Fatalf("%q: not read by the fast path", text)
				}
			}
		}
	}
	for _, text := range []string{
		"2026-12-02T04:52:07.5+01:00",
		"2026-12-02 04:52:07.123",
		"2026-12-02 04:52:07Z",
		"2026-12-02 04:52",
		"2026-12-02",
		"2026-12-02 04:52:07.123456 +0000 UTC",
		"2026-12-02 04:52:07.123456 +0000 UTC m=+0.000000001",
		"2026-12-02 04:52:07.1234567890+00:00",
	} {
		got, err := parseStoredTime(text)
		if err != nil || got.Location() != time.UTC || got.Year() != 2026 {
			t.Errorf("%q: %v, %v", text, got, err)
		}
	}
	for _, text := range []string{"", "yesterday", "2026-02-30 00:00:00+00:00", "2026-13-01 00:00:00+00:00", "2026-12-02 24:00:00+00:00",
		"2026-12-02 04:52:07.+00:00", "2026-12-02 04:52:60+00:00", "2026-12-02 04:52:07+0100"} {
		if _, ok := parseSQLiteTime(text); ok {
			t.Errorf("%q: read by the fast path", text)
		}
		if got, err := parseStoredTime(text); err == nil {
			if want, werr := time.Parse("2006-01-02 15:04:05.999999999-07:00", text); werr != nil || !got.Equal(want) {
				t.Errorf("%q: read as %v", text, got)
			}
		}
	}
}

func BenchmarkParseStoredTime(b *testing.B) {
	text := time.Date(2026, 12, 2, 4, 52, 7, 123456000, time.UTC).Format("2006-01-02 15:04:05.999999999-07:00")
	b.ReportAllocs()
	for range b.N {
		if _, err := parseStoredTime(text); err != nil {
			b.Fatal(err)
		}
	}
}

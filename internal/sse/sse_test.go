package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// ev is an Event copied out of the Reader's buffers; a nil pointer field
// stands for a nil slice.
type ev struct {
	raw  string
	data *string
	off  int
	name *string
}

func (e ev) String() string {
	f := func(p *string) string {
		if p == nil {
			return "nil"
		}
		return fmt.Sprintf("%q", *p)
	}
	return fmt.Sprintf("{raw %q data %s off %d name %s}", e.raw, f(e.data), e.off, f(e.name))
}

func ptr(s string) *string { return &s }

func str(b []byte) *string {
	if b == nil {
		return nil
	}
	return ptr(string(b))
}

func eq(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func (e ev) equal(o ev) bool {
	return e.raw == o.raw && e.off == o.off && eq(e.data, o.data) && eq(e.name, o.name)
}

// readAll reads every event, checking the Event invariants as it goes; the
// last element of evs is the unfinished event Next returned with err, if any.
func readAll(t testing.TB, rd io.Reader, max int) (evs []ev, err error) {
	return readAllBuf(t, rd, max, initialBufSize)
}

func readAllBuf(t testing.TB, rd io.Reader, max, bufSize int) (evs []ev, err error) {
	r := newReader(rd, max, bufSize)
	for range 1 << 20 {
		e, err := r.Next()
		if e.DataOffset >= 0 && (e.Data == nil || !bytes.Equal(e.Raw[e.DataOffset:e.DataOffset+len(e.Data)], e.Data)) {
			t.Fatalf("DataOffset %d does not locate Data %q in Raw %q", e.DataOffset, e.Data, e.Raw)
		}
		if err != nil {
			if e.Raw != nil {
				evs = append(evs, ev{raw: string(e.Raw), off: e.DataOffset})
			}
			if e2, err2 := r.Next(); err2 != err || e2.Raw != nil {
				t.Fatalf("error not sticky: %v, then %v (%q)", err, err2, e2.Raw)
			}
			return evs, err
		}
		if len(e.Raw) == 0 {
			t.Fatal("Next returned an empty event without an error")
		}
		evs = append(evs, ev{raw: string(e.Raw), data: str(e.Data), off: e.DataOffset, name: str(e.Name)})
	}
	t.Fatal("Next does not stop")
	return nil, nil
}

// logical drops what depends on how reads were split: blank-line runs (a
// "\n" ends up in one when a "\r\n" is split across reads; one at the very
// start of the stream may start with a BOM) and the line ending bytes at the
// end of Raw.
func logical(evs []ev) []ev {
	var out []ev
	for i, e := range evs {
		blank := e.raw
		if i == 0 {
			blank = strings.TrimPrefix(blank, string(bom))
		}
		if strings.Trim(blank, "\r\n") == "" {
			continue
		}
		e.raw = strings.TrimRight(e.raw, "\r\n")
		out = append(out, e)
	}
	return out
}

func concat(evs []ev) string {
	var sb strings.Builder
	for _, e := range evs {
		sb.WriteString(e.raw)
	}
	return sb.String()
}

// readers returns the ways a test stream is fed to the Reader.
func readers(in string) map[string]func() io.Reader {
	return map[string]func() io.Reader{
		"whole":    func() io.Reader { return strings.NewReader(in) },
		"one byte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(in)) },
		"half":     func() io.Reader { return iotest.HalfReader(strings.NewReader(in)) },
		"data+EOF": func() io.Reader { return iotest.DataErrReader(strings.NewReader(in)) },
		"chunks/3": func() io.Reader { return &chunkReader{data: []byte(in), sizes: []int{3}} },
		"chunks/7": func() io.Reader { return &chunkReader{data: []byte(in), sizes: []int{7, 1, 2}} },
	}
}

// chunkReader returns data in reads of the given sizes, cycling through them.
type chunkReader struct {
	data  []byte
	sizes []int
	i     int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.data), c.sizes[c.i%len(c.sizes)])
	c.i++
	n = copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func TestNext(t *testing.T) {
	for _, c := range []struct {
		name string
		in   string
		want []ev // as read from a single read of the whole input
		err  error
	}{
		{"empty", "", nil, io.EOF},
		{"single data line", "data: hello\n\n", []ev{{"data: hello\n\n", ptr("hello"), 6, nil}}, io.EOF},
		{"no space", "data:hello\n\n", []ev{{"data:hello\n\n", ptr("hello"), 5, nil}}, io.EOF},
		{"one space stripped", "data:  hello \n\n", []ev{{"data:  hello \n\n", ptr(" hello "), 6, nil}}, io.EOF},
		{"colon in value", "data: {\"a\":1}\n\n", []ev{{"data: {\"a\":1}\n\n", ptr(`{"a":1}`), 6, nil}}, io.EOF},
		{"empty data", "data:\n\n", []ev{{"data:\n\n", ptr(""), 5, nil}}, io.EOF},
		{"data without colon", "data\n\n", []ev{{"data\n\n", ptr(""), 4, nil}}, io.EOF},
		{"multi-line data", "data: a\ndata:b\ndata\ndata: \n\n", []ev{{"data: a\ndata:b\ndata\ndata: \n\n", ptr("a\nb\n\n"), -1, nil}}, io.EOF},
		{"event name", "event: ping\ndata: {}\n\n", []ev{{"event: ping\ndata: {}\n\n", ptr("{}"), 18, ptr("ping")}}, io.EOF},
		{"last event name wins", "event: a\nevent:b\n\n", []ev{{"event: a\nevent:b\n\n", nil, -1, ptr("b")}}, io.EOF},
		{"event without colon", "event\ndata: x\n\n", []ev{{"event\ndata: x\n\n", ptr("x"), 12, ptr("")}}, io.EOF},
		{"comment", ": keep-alive\n\n", []ev{{": keep-alive\n\n", nil, -1, nil}}, io.EOF},
		{"comment between data", "data: a\n: c\ndata: b\n\n", []ev{{"data: a\n: c\ndata: b\n\n", ptr("a\nb"), -1, nil}}, io.EOF},
		{"other fields ignored", "id: 7\nretry: 10\nfoo: bar\nDATA: no\ndata: x\n\n", []ev{{"id: 7\nretry: 10\nfoo: bar\nDATA: no\ndata: x\n\n", ptr("x"), 40, nil}}, io.EOF},
		{"two events", "data: a\n\ndata: b\n\n", []ev{{"data: a\n\n", ptr("a"), 6, nil}, {"data: b\n\n", ptr("b"), 6, nil}}, io.EOF},
		{"CRLF", "data: a\r\n\r\nevent: e\r\ndata: b\r\n\r\n", []ev{{"data: a\r\n\r\n", ptr("a"), 6, nil}, {"event: e\r\ndata: b\r\n\r\n", ptr("b"), 16, ptr("e")}}, io.EOF},
		{"CR", "data: a\r\rdata: b\rdata: c\r\r", []ev{{"data: a\r\r", ptr("a"), 6, nil}, {"data: b\rdata: c\r\r", ptr("b\nc"), -1, nil}}, io.EOF},
		{"mixed endings", "data: a\r\ndata: b\rdata: c\n\r\n", []ev{{"data: a\r\ndata: b\rdata: c\n\r\n", ptr("a\nb\nc"), -1, nil}}, io.EOF},
		{"CR then CRLF blank", "data: a\r\r\n", []ev{{"data: a\r\r\n", ptr("a"), 6, nil}}, io.EOF},
		{"blank lines around", "\n\r\ndata: a\n\n\n\rdata: b\n\n\n", []ev{
			{"\n\r\n", nil, -1, nil}, {"data: a\n\n", ptr("a"), 6, nil}, {"\n\r", nil, -1, nil}, {"data: b\n\n", ptr("b"), 6, nil}, {"\n", nil, -1, nil},
		}, io.EOF},
		{"BOM", "\xEF\xBB\xBFdata: a\n\n", []ev{{"\xEF\xBB\xBFdata: a\n\n", ptr("a"), 9, nil}}, io.EOF},
		{"BOM only first", "data: a\n\n\xEF\xBB\xBFdata: b\n\n", []ev{{"data: a\n\n", ptr("a"), 6, nil}, {"\xEF\xBB\xBFdata: b\n\n", nil, -1, nil}}, io.EOF},
		{"done", "data: {}\n\ndata: [DONE]\n\n", []ev{{"data: {}\n\n", ptr("{}"), 6, nil}, {"data: [DONE]\n\n", ptr("[DONE]"), 6, nil}}, io.EOF},
		{"CR at EOF ends the line", "data: a\n\r", []ev{{"data: a\n\r", ptr("a"), 6, nil}}, io.EOF},

		{"truncated line", "data: a\n\ndata: b", []ev{{"data: a\n\n", ptr("a"), 6, nil}, {"data: b", nil, -1, nil}}, ErrUnexpectedEOF},
		{"truncated event", "data: a\n", []ev{{"data: a\n", nil, -1, nil}}, ErrUnexpectedEOF},
		{"truncated CR", "data: a\r", []ev{{"data: a\r", nil, -1, nil}}, ErrUnexpectedEOF},
		{"truncated comment", "data: a\n\n:", []ev{{"data: a\n\n", ptr("a"), 6, nil}, {":", nil, -1, nil}}, ErrUnexpectedEOF},
		{"truncated after blanks", "\n\ndata", []ev{{"\n\n", nil, -1, nil}, {"data", nil, -1, nil}}, ErrUnexpectedEOF},
	} {
		for rname, mk := range readers(c.in) {
			t.Run(c.name+"/"+rname, func(t *testing.T) {
				got, err := readAll(t, mk(), 0)
				if err != c.err {
					t.Errorf("error = %v, want %v", err, c.err)
				}
				if concat(got) != c.in {
					t.Errorf("concatenated Raw = %q, want the input %q", concat(got), c.in)
				}
				want := c.want
				if rname != "whole" {
					got, want = logical(got), logical(want)
				}
				if len(got) != len(want) {
					t.Fatalf("got %d events %v, want %d %v", len(got), got, len(want), want)
				}
				for i := range got {
					if !got[i].equal(want[i]) {
						t.Errorf("event %d = %v, want %v", i, got[i], want[i])
					}
				}
			})
		}
	}
}

func TestIsDone(t *testing.T) {
	for data, want := range map[string]bool{"[DONE]": true, " [DONE]": false, "[DONE] ": false, "[done]": false, "": false} {
		if got := (Event{Data: []byte(data)}).IsDone(); got != want {
			t.Errorf("IsDone(%q) = %v, want %v", data, got, want)
		}
	}
	if (Event{}).IsDone() {
		t.Error("IsDone() of an event without data = true")
	}
}

func TestTooLarge(t *testing.T) {
	ev := "data: " + strings.Repeat("x", 100) + "\n\n"
	in := ev + ev
	for rname, mk := range readers(in) {
		t.Run(rname, func(t *testing.T) {
			if got, err := readAll(t, mk(), len(ev)); err != io.EOF || len(got) != 2 {
				t.Errorf("limit = event size: %d events, %v; want 2, EOF", len(got), err)
			}
			got, err := readAll(t, mk(), len(ev)-1)
			if err != ErrEventTooLarge || len(got) != 0 {
				t.Errorf("limit = event size - 1: %d events, %v; want 0, %v", len(got), err, ErrEventTooLarge)
			}
		})
	}
	// A run of blank lines is not an event and is never too large.
	if got, err := readAll(t, strings.NewReader(strings.Repeat("\n", 100)+"data: x\n\n"), 10); err != io.EOF || len(logical(got)) != 1 {
		t.Errorf("blank lines: %v, %v; want one event, EOF", got, err)
	}
}

func TestReadError(t *testing.T) {
	boom := errors.New("boom")
	in := "data: a\n\ndata: b"
	for rname, mk := range readers(in) {
		t.Run(rname, func(t *testing.T) {
			got, err := readAll(t, io.MultiReader(mk(), iotest.ErrReader(boom)), 0)
			if !errors.Is(err, boom) {
				t.Errorf("error = %v, want %v", err, boom)
			}
			if concat(got) != in {
				t.Errorf("concatenated Raw = %q, want %q", concat(got), in)
			}
			if len(got) != 2 || got[0].data == nil || *got[0].data != "a" || got[1].data != nil {
				t.Errorf("events = %v, want a, then the unfinished event", got)
			}
		})
	}
	if !errors.Is(ErrUnexpectedEOF, io.ErrUnexpectedEOF) {
		t.Error("ErrUnexpectedEOF does not wrap io.ErrUnexpectedEOF")
	}
}

// zeroReader never makes progress.
type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestNoProgress(t *testing.T) {
	if _, err := NewReader(zeroReader{}, 0).Next(); err != io.ErrNoProgress {
		t.Errorf("error = %v, want %v", err, io.ErrNoProgress)
	}
}

// TestRawIsolated checks that an append to one event's slices cannot
// overwrite bytes of the stream still to be returned.
func TestRawIsolated(t *testing.T) {
	r := NewReader(strings.NewReader("data: a\ndata: b\n\ndata: c\n\n"), 0)
	e, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	_ = append(e.Raw, "XXXXXXXX"...)
	_ = append(e.Data, "XXXXXXXX"...)
	if e, err = r.Next(); err != nil || string(e.Raw) != "data: c\n\n" {
		t.Fatalf("second event = %q, %v", e.Raw, err)
	}
	_ = append(e.Data, "XXXXXXXX"...)
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("end = %v, want EOF", err)
	}
}

// reference is a direct transcription of the WHATWG line and field rules,
// without any buffering, to check the Reader against. It returns the events
// that have at least one non-blank line, and whether the stream ends inside
// an event.
func reference(in []byte) (evs []ev, truncated bool) {
	first := true
	var cur *ev
	nData := 0
	var data []string
	for len(in) > 0 {
		i := bytes.IndexAny(in, "\r\n")
		if i < 0 {
			return evs, true
		}
		line := string(in[:i])
		if first {
			line, first = strings.TrimPrefix(line, string(bom)), false
		}
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			i++
		}
		in = in[i+1:]
		if line == "" {
			if cur != nil {
				if nData > 0 {
					cur.data = ptr(strings.Join(data, "\n"))
				}
				evs = append(evs, *cur)
				cur, nData, data = nil, 0, nil
			}
			continue
		}
		if cur == nil {
			cur = &ev{off: -1}
		}
		name, value, ok := strings.Cut(line, ":")
		if ok {
			value = strings.TrimPrefix(value, " ")
		}
		switch name {
		case "data":
			nData++
			data = append(data, value)
		case "event":
			cur.name = ptr(value)
		}
	}
	return evs, cur != nil
}

func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"data: hello\n\n",
		"event: ping\ndata: a\ndata: b\n\n: keep-alive\n\n",
		"data: a\r\n\r\ndata: b\r\rdata: c\n\r\n",
		"\n\r\n\xEF\xBB\xBFdata\n\n",
		"\xEF\xBB\xBF\n",
		"\n\xEF\xBB\xBF\n\n",
		"\xEF\xBB\xBF\r\ndata: x\n\n",
		"data: [DONE]\n\n",
		"data: a\ndata",
		"data: {\"id\":\"x\",\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		want, truncated := reference(in)
		wantErr := io.EOF
		if truncated {
			wantErr = ErrUnexpectedEOF
		}
		var first []ev
		for rname, mk := range readers(string(in)) {
			// A tiny starting buffer makes the Reader slide and grow it.
			got, err := readAllBuf(t, mk(), 0, 1+len(rname)%5)
			if err != wantErr {
				t.Fatalf("%s: error = %v, want %v", rname, err, wantErr)
			}
			if concat(got) != string(in) {
				t.Fatalf("%s: concatenated Raw = %q, want the input", rname, concat(got))
			}
			if truncated {
				got = got[:len(got)-1]
			}
			got = logical(got)
			if len(got) != len(want) {
				t.Fatalf("%s: got %d events %v, reference has %d %v", rname, len(got), got, len(want), want)
			}
			for i := range got {
				if !eq(got[i].data, want[i].data) || !eq(got[i].name, want[i].name) {
					t.Fatalf("%s: event %d = %v, reference has %v", rname, i, got[i], want[i])
				}
			}
			if first == nil {
				first = got
			}
			for i := range got {
				if !got[i].equal(first[i]) {
					t.Fatalf("%s: event %d = %v, another reader gave %v", rname, i, got[i], first[i])
				}
			}

			// Under a size limit the Reader gives the same events up to
			// the first one that does not fit.
			const limit = 16
			got, err = readAllBuf(t, mk(), limit, 1)
			if err == ErrEventTooLarge {
				if !strings.HasPrefix(string(in), concat(got)) {
					t.Fatalf("%s: with a limit, concatenated Raw %q is not a prefix of the input", rname, concat(got))
				}
			} else if err != wantErr || concat(got) != string(in) {
				t.Fatalf("%s: with a limit: %v, %q", rname, err, concat(got))
			} else if truncated {
				got = got[:len(got)-1]
			}
			for _, e := range got {
				if len(e.raw) > limit {
					t.Fatalf("%s: event %v is over the limit", rname, e)
				}
			}
			got = logical(got)
			if len(got) > len(want) || (err != ErrEventTooLarge && len(got) != len(want)) {
				t.Fatalf("%s: with a limit: %d events, want %d", rname, len(got), len(want))
			}
			for i := range got {
				if !got[i].equal(first[i]) {
					t.Fatalf("%s: with a limit, event %d = %v, want %v", rname, i, got[i], first[i])
				}
			}
		}
	})
}

// stream is n typical chat.completion.chunk events, about 200 bytes each.
func stream(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "data: {\"id\":\"chatcmpl-9xYzAbCdEfGhIjKlMnOpQrStUv\",\"object\":\"chat.completion.chunk\",\"created\":1717000000,\"model\":\"gpt-4o-2024-05-13\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" tok%04d\"},\"finish_reason\":null}]}\n\n", i)
	}
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

func BenchmarkReader(b *testing.B) {
	const events = 1000
	in := stream(events)
	for _, c := range []struct {
		name string
		mk   func() io.Reader
	}{
		{"bulk", func() io.Reader { return bytes.NewReader(in) }},
		// One event per read, as a streaming upstream delivers them.
		{"event-per-read", func() io.Reader { return &chunkReader{data: in, sizes: []int{len(in) / (events + 1)}} }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				r := NewReader(c.mk(), 0)
				n := 0
				for {
					e, err := r.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					if e.IsDone() {
						n++
					}
				}
				if n != 1 {
					b.Fatal("no [DONE]")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(events+1)), "ns/event")
		})
	}
}

func TestReady(t *testing.T) {
	r := NewReader(strings.NewReader("data: a\n\ndata: b\n\ndata: c"), 0)
	for i, want := range []bool{true, false} {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		if r.Ready() != want {
			t.Fatalf("after event %d: Ready() = %v", i, !want)
		}
	}
}

// TestRelease: a Reader gives up its buffer only when nothing is unread,
// and reads on after it as before.
func TestRelease(t *testing.T) {
	r := NewReader(strings.NewReader("data: a\n\ndata: b\n\ndata: c\n\n"), 0)
	ev, err := r.Next()
	if err != nil || string(ev.Data) != "a" {
		t.Fatalf("first: %q %v", ev.Data, err)
	}
	r.Release() // b and c are buffered: kept
	if r.buf == nil || !r.Ready() {
		t.Fatal("Release dropped unread bytes")
	}
	for _, want := range []string{"b", "c"} {
		if ev, err = r.Next(); err != nil || string(ev.Data) != want {
			t.Fatalf("%s: %q %v", want, ev.Data, err)
		}
	}
	r.Release()
	if r.buf != nil {
		t.Fatal("Release kept the buffer of a drained Reader")
	}
	r.Release() // twice is harmless
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("at the end: %v, want io.EOF", err)
	}

	// A reader released between every event reads a stream whose events
	// straddle its reads.
	src := strings.Repeat("data: {\"x\":1}\n\n", 200)
	r = NewReader(iotest.OneByteReader(strings.NewReader(src)), 0)
	var got strings.Builder
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got.Write(ev.Raw)
		if !r.Ready() {
			r.Release()
		}
	}
	if got.String() != src {
		t.Fatal("events changed across releases")
	}
}

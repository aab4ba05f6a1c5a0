// Package sse splits a Server-Sent Events stream into events so that a relay
// can forward an upstream stream event by event.
//
// The relay forwards most events untouched and rewrites a few bytes of
// others, so an Event carries its exact wire bytes (Raw) as well as its parsed
// fields, and the bytes of all events put together are the stream itself. The
// Reader works on its own buffer and hands out subslices of it, which keeps
// the per-event cost at zero allocations.
//
// Parsing follows the WHATWG "event stream" format: lines end in "\r\n", "\n"
// or "\r"; a blank line ends an event; "name:value" and "name: value" carry
// the same value; a line without a colon is a field name with an empty value;
// a line starting with ':' is a comment; a leading byte order mark is ignored.
package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

const (
	defaultMaxEvent = 16 << 20
	// initialBufSize fits a typical chat chunk several times; a larger
	// event grows the buffer. An idle stream holds it (issue 21).
	initialBufSize = 1 << 10
	// maxEmptyReads matches bufio: a reader that keeps returning 0, nil is
	// broken, and spinning on it forever would hang the relay.
	maxEmptyReads = 100
)

// ErrUnexpectedEOF is returned when the stream ends inside an event, which
// tells a truncated upstream response from a finished one.
var ErrUnexpectedEOF = fmt.Errorf("sse: stream ended in the middle of an event: %w", io.ErrUnexpectedEOF)

// ErrEventTooLarge is returned when an event exceeds the Reader's limit.
var ErrEventTooLarge = errors.New("sse: event exceeds the size limit")

var bom = []byte("\xEF\xBB\xBF")

// Event is one SSE event as read from the wire.
//
// Besides events proper, Next returns two kinds of event without fields so
// that the concatenated Raw of all events is the stream byte for byte: a
// comment-only event (a keep-alive), and a run of blank lines that precedes
// an event (some servers send bare newlines as keep-alives; it is also where
// the "\n" of a "\r\n" lands when a read ends between the two bytes and the
// "\r" already ended an event). Both have Data and Name nil.
type Event struct {
	// Raw is the exact bytes of the event, including its terminating blank
	// line. It is valid until the next call to Next.
	Raw []byte
	// Data is the value of the data field: for exactly one data line, a
	// subslice of Raw; for several data lines, the values joined with "\n"
	// (a buffer reused between calls); nil if there is no data line. A data
	// line with an empty value gives an empty, non-nil Data.
	Data []byte
	// DataOffset is the offset of Data within Raw when there is exactly one
	// data line, so that a relay can splice a rewritten value into Raw; -1
	// otherwise.
	DataOffset int
	// Name is the value of the last "event" field (a subslice of Raw), nil
	// if there is none.
	Name []byte
}

// IsDone reports whether the event's data is exactly "[DONE]", the OpenAI
// stream terminator.
func (e Event) IsDone() bool { return string(e.Data) == "[DONE]" }

// Reader reads events from an upstream body. It is not safe for concurrent
// use.
type Reader struct {
	rd   io.Reader
	max  int
	buf  []byte
	r, w int // buf[r:w] has been read from rd but not yet returned in an event

	err   error // the error that ended rd, returned once buf is used up
	fatal error // returned by every call to Next from now on

	data    []byte // joined value of several data lines
	started bool   // the first line, the only place a BOM may sit, is behind us
}

// NewReader returns a Reader of r. maxEvent caps the size in bytes of one
// event's Raw; <= 0 means 16 MiB.
func NewReader(r io.Reader, maxEvent int) *Reader {
	return newReader(r, maxEvent, initialBufSize)
}

// newReader lets tests start with a tiny buffer, so that short inputs
// exercise the compaction and growth paths.
func newReader(r io.Reader, maxEvent, bufSize int) *Reader {
	if maxEvent <= 0 {
		maxEvent = defaultMaxEvent
	}
	return &Reader{rd: r, max: maxEvent, buf: make([]byte, max(1, min(bufSize, maxEvent)))}
}

// Next returns the next event.
//
// At a clean end of stream (the stream ends right after a blank line, or is
// empty) it returns io.EOF. If the stream ends inside an event it returns
// ErrUnexpectedEOF; if an event grows beyond the limit, ErrEventTooLarge; an
// error from the underlying reader is returned as is. In the ErrUnexpectedEOF
// and read-error cases the returned Event's Raw holds the unfinished event's
// bytes (nil if none), so that they can be logged or forwarded. Errors are
// sticky: later calls return the same error and an empty Event.
func (r *Reader) Next() (Event, error) {
	if r.fatal != nil {
		return Event{DataOffset: -1}, r.fatal
	}
	if r.r == r.w {
		// The previous event's Raw is no longer valid, so an empty buffer
		// can restart at 0 without copying.
		r.r, r.w = 0, 0
	}
	r.data = r.data[:0]

	// All offsets are relative to the event's start, buf[r.r], so that the
	// buffer may be compacted or grown while the event is incomplete.
	var (
		b                = r.buf[r.r:r.w]
		p, s             int  // start of the current line; where to resume looking for its end
		fields           bool // a non-blank line was seen: an event is in progress
		nData            int
		dataOff, dataLen int // of the first data line's value
		nameOff, nameLen = -1, 0
	)
	for {
		e := lineEnd(b[s:])
		if e >= 0 {
			e += s
			next := e + 1
			if b[e] == '\r' {
				if next < len(b) {
					if b[next] == '\n' {
						next++
					}
				} else if e > p && r.err == nil {
					// Without the next byte we cannot tell "\r" from
					// "\r\n", and a "\n" left over would read as a blank
					// line and end the event early. (A blank "\r" line
					// needs no wait: a "\n" after it is just one more
					// blank line, outside any event.)
					s = e
					e = -1
				}
			}
			if e >= 0 {
				line := b[p:e]
				if len(line) > 0 && !fields && p > 0 {
					return r.emit(Event{Raw: b[:p:p], DataOffset: -1}, p), nil
				}
				if !r.started {
					r.started = true
					line = bytes.TrimPrefix(line, bom)
				}
				if len(line) == 0 {
					if !fields {
						p, s = next, next
						continue
					}
					raw := b[:next:next]
					ev := Event{Raw: raw, DataOffset: -1}
					switch {
					case nData == 1:
						ev.Data = raw[dataOff : dataOff+dataLen : dataOff+dataLen]
						ev.DataOffset = dataOff
					case nData > 1:
						ev.Data = r.data[:len(r.data):len(r.data)]
					}
					if nameOff >= 0 {
						ev.Name = raw[nameOff : nameOff+nameLen : nameOff+nameLen]
					}
					return r.emit(ev, next), nil
				}
				fields = true
				name, valueOff := fieldName(line, e)
				switch string(name) {
				case "data":
					nData++
					switch nData {
					case 1:
						dataOff, dataLen = valueOff, e-valueOff
					case 2:
						r.data = append(r.data, b[dataOff:dataOff+dataLen]...)
						fallthrough
					default:
						r.data = append(r.data, '\n')
						r.data = append(r.data, b[valueOff:e]...)
					}
				case "event":
					nameOff, nameLen = valueOff, e-valueOff
				}
				p, s = next, next
				continue
			}
		} else {
			s = len(b)
		}

		// No complete line is buffered.
		if !fields && p > 0 {
			// Blank lines are all we have: hand them over now rather than
			// wait for the event after them.
			return r.emit(Event{Raw: b[:p:p], DataOffset: -1}, p), nil
		}
		if r.err != nil {
			var raw []byte
			if len(b) > 0 {
				raw = b[:len(b):len(b)]
			}
			if r.err == io.EOF {
				if raw == nil {
					r.fatal = io.EOF
					return Event{DataOffset: -1}, io.EOF
				}
				r.fatal = ErrUnexpectedEOF
			} else {
				r.fatal = r.err
			}
			r.r = r.w
			return Event{Raw: raw, DataOffset: -1}, r.fatal
		}
		if len(b) >= r.max {
			r.fatal = ErrEventTooLarge
			return Event{DataOffset: -1}, r.fatal
		}
		r.fill()
		b = r.buf[r.r:r.w]
	}
}

// emit consumes n bytes, the event's Raw.
func (r *Reader) emit(ev Event, n int) Event {
	r.r += n
	return ev
}

// fill makes room after buf[r:w] and reads into it once, recording a read
// error in r.err.
func (r *Reader) fill() {
	if r.buf == nil { // given up by Release, with nothing unread
		r.buf, r.r, r.w = bufs.Get().(*[initialBufSize]byte)[:min(initialBufSize, r.max)], 0, 0
	}
	switch n := r.w - r.r; {
	case n > len(r.buf)/2 && len(r.buf) < r.max:
		// Sliding a big partial event down would leave little room per
		// read; grow instead. The event stays under r.max, so the buffer
		// never needs to be larger than that.
		nb := make([]byte, min(2*len(r.buf), r.max))
		copy(nb, r.buf[r.r:r.w])
		r.buf, r.r, r.w = nb, 0, n
	case r.w == len(r.buf):
		// r.r > 0 here: a full buffer holding one partial event is
		// either grown above or too large for Next to call fill.
		copy(r.buf, r.buf[r.r:r.w])
		r.r, r.w = 0, n
	}
	for range maxEmptyReads {
		n, err := r.rd.Read(r.buf[r.w:])
		if n < 0 || n > len(r.buf)-r.w {
			r.err = errors.New("sse: reader returned an invalid count")
			return
		}
		r.w += n
		if err != nil {
			r.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	r.err = io.ErrNoProgress
}

// bufs recycles the buffers of initialBufSize that Release gives up.
var bufs = sync.Pool{New: func() any { return new([initialBufSize]byte) }}

// Release gives up the Reader's buffer when it holds no unread bytes, so
// that a stream waiting long for its next event holds none (issue 21); the
// next read takes one again. The last event's fields are no longer valid
// after it. It does nothing while bytes are buffered.
func (r *Reader) Release() {
	if r.r != r.w || r.buf == nil {
		return
	}
	if len(r.buf) == initialBufSize {
		bufs.Put((*[initialBufSize]byte)(r.buf))
	}
	r.buf, r.r, r.w = nil, 0, 0
	r.data = nil
}

// lineEnd returns the index of the first '\r' or '\n' in b, or -1. Two
// IndexByte passes beat a byte loop on typical lines, which are long JSON
// payloads with the terminator at the very end.
func lineEnd(b []byte) int {
	n := bytes.IndexByte(b, '\n')
	if n < 0 {
		return bytes.IndexByte(b, '\r')
	}
	if c := bytes.IndexByte(b[:n], '\r'); c >= 0 {
		return c
	}
	return n
}

// fieldName splits a non-blank line ending at end into its field name and
// the offset of its value. A comment has the empty name.
func fieldName(line []byte, end int) (name []byte, valueOff int) {
	colon := bytes.IndexByte(line, ':')
	if colon < 0 {
		return line, end
	}
	v := colon + 1
	if v < len(line) && line[v] == ' ' {
		v++
	}
	return line[:colon], end - len(line) + v
}

// Ready reports whether a whole event is already buffered, so that the
// next call to Next returns without reading. A relay flushes only when it
// is false: events that arrived together leave in one write, and an event
// is never held back waiting for the next one.
func (r *Reader) Ready() bool {
	b := r.buf[r.r:r.w]
	return bytes.Contains(b, []byte("\n\n")) || bytes.Contains(b, []byte("\r\r")) || bytes.Contains(b, []byte("\r\n\r\n"))
}

package fleet

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"time"
)

// A minimal HTTP/1.1 client for the controller's probes.
//
// When probe connections are not kept between sweeps (an interval over
// readiness.ProbeIdleTimeout), each probe dials, sends its one or two GETs
// on that connection and closes it. net/http's client costs such a
// connection a dial goroutine, a read loop and a write loop and the
// channels between them; at 1,000 boxes a sweep every 10 s that was about
// a fifth of the gateway's steady CPU. A probeConn does the same work in
// the probing goroutine: the request written at once, the answer read
// through one pooled buffer, deadlines from the context. It reads only
// what a probe needs: the status, Content-Length, Transfer-Encoding and
// Connection headers, and a body of a known length, chunked, or up to the
// end of the connection, under a cap.

// Caps on what a probe reads of an answer besides its body.
const (
	probeMaxLine    = 4 << 10 // the status line and each header line
	probeMaxHeaders = 64      // header lines of an answer
	probeMaxInterim = 4       // 1xx answers skipped before the real one
)

// errProbeTooLarge is a body over the probe's cap.
var errProbeTooLarge = errors.New("body too large")

// probeReaders recycles the connections' read buffers.
var probeReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, probeMaxLine) }}

// probeConn sends GETs to one address, one at a time, over one connection
// while the server keeps it open. It is used by one goroutine; close it
// after its last request.
type probeConn struct {
	dial  func(ctx context.Context, network, addr string) (net.Conn, error)
	addr  string // host:port, also the Host header
	limit int64  // body cap

	conn net.Conn
	br   *bufio.Reader
	wbuf []byte
}

// probeAnswer is what a probe reads of an answer.
type probeAnswer struct {
	status   int
	location bool // a Location header was sent
	body     []byte
}

// get sends GET path with an optional bearer key and reads the answer;
// last asks the server to close the connection after it (and closes it
// here either way). A body over the cap is errProbeTooLarge. The context
// bounds the whole exchange. Dial errors are returned as the dialer gave
// them, so readiness.Refused recognises a refusal.
func (p *probeConn) get(ctx context.Context, path, key string, last bool) (probeAnswer, error) {
	if p.conn == nil {
		conn, err := p.dial(ctx, "tcp", p.addr)
		if err != nil {
			return probeAnswer{}, err
		}
		p.conn = conn
		p.br = probeReaders.Get().(*bufio.Reader)
		p.br.Reset(conn)
	}
	if d, ok := ctx.Deadline(); ok {
		_ = p.conn.SetDeadline(d)
	} else {
		_ = p.conn.SetDeadline(time.Time{})
	}
	conn := p.conn
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	a, keep, err := p.exchange(path, key, last)
	if !stop() {
		keep = false // the deadline was cut short: the connection is spent
	}
	if err != nil && (ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded)) {
		// The context ended during the exchange (the connection's
		// deadlines are only ever the context's): say so rather than
		// what the interrupted read saw.
		err = cmp.Or(ctx.Err(), context.DeadlineExceeded)
	}
	if err != nil || !keep || last {
		p.close()
	}
	if err != nil {
		return probeAnswer{}, err
	}
	return a, nil
}

// exchange writes the request and reads its answer; keep reports whether
// the connection may carry another request.
func (p *probeConn) exchange(path, key string, last bool) (a probeAnswer, keep bool, err error) {
	b := append(p.wbuf[:0], "GET "...)
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, p.addr...)
	b = append(b, "\r\nUser-Agent: rolter-probe\r\nAccept: application/json\r\n"...)
	if key != "" {
		b = append(b, "Authorization: Bearer "...)
		b = append(b, key...)
		b = append(b, "\r\n"...)
	}
	if last {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "\r\n"...)
	p.wbuf = b
	_, err = p.conn.Write(b)
	clear(b) // the key does not stay in the buffer
	if err != nil {
		return a, false, err
	}
	for range probeMaxInterim + 1 {
		var h probeHead
		if h, err = readProbeHead(p.br); err != nil {
			return a, false, err
		}
		if h.status >= 100 && h.status < 200 {
			if h.status == 101 {
				return a, false, errors.New("switched protocols")
			}
			continue // an interim answer; the real one follows
		}
		a.status, a.location = h.status, h.location
		a.body, err = readProbeBody(p.br, &h, p.limit)
		return a, err == nil && h.keep, err
	}
	return a, false, errors.New("too many interim (1xx) answers")
}

// probeHead is what a probe keeps of an answer's status line and headers.
type probeHead struct {
	status   int
	length   int64 // Content-Length; -1 when absent
	chunked  bool
	keep     bool // HTTP/1.1 without Connection: close
	location bool
}

// readProbeHead reads an answer's status line and headers.
func readProbeHead(br *bufio.Reader) (probeHead, error) {
	h := probeHead{length: -1}
	line, err := probeLine(br)
	if err != nil {
		return h, err
	}
	// HTTP/1.x NNN reason
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' || (len(line) > 12 && line[12] != ' ') {
		return h, fmt.Errorf("malformed status line %q", truncateBytes(line, 40))
	}
	code, err := strconv.Atoi(string(line[9:12]))
	if err != nil || code < 100 {
		return h, fmt.Errorf("malformed status line %q", truncateBytes(line, 40))
	}
	h.status, h.keep = code, line[7] == '1'
	for n := 0; ; n++ {
		line, err := probeLine(br)
		if err != nil {
			return h, err
		}
		if len(line) == 0 {
			break
		}
		if n == probeMaxHeaders {
			return h, fmt.Errorf("more than %d header lines", probeMaxHeaders)
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return h, errors.New("malformed header line")
		}
		value = bytes.TrimSpace(value)
		switch {
		case asciiEqualFold(name, "Content-Length"):
			v, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil || v < 0 || (h.length >= 0 && v != h.length) {
				return h, errors.New("bad Content-Length")
			}
			h.length = v
		case asciiEqualFold(name, "Transfer-Encoding"):
			if !asciiEqualFold(value, "chunked") {
				return h, fmt.Errorf("unsupported Transfer-Encoding %q", truncateBytes(value, 40))
			}
			h.chunked = true
		case asciiEqualFold(name, "Connection"):
			for _, tok := range bytes.Split(value, []byte(",")) {
				if asciiEqualFold(bytes.TrimSpace(tok), "close") {
					h.keep = false
				}
			}
		case asciiEqualFold(name, "Location"):
			h.location = true
		}
	}
	if h.chunked {
		h.length = -1 // chunked framing wins (RFC 9112 6.3)
	}
	return h, nil
}

// readProbeBody reads the body h frames, at most limit bytes.
func readProbeBody(br *bufio.Reader, h *probeHead, limit int64) ([]byte, error) {
	if h.status == 204 || h.status == 304 {
		h.length = 0
		return nil, nil
	}
	switch {
	case h.chunked:
		return readChunked(br, limit)
	case h.length >= 0:
		if h.length > limit {
			return nil, fmt.Errorf("%w: over %d bytes", errProbeTooLarge, limit)
		}
		body := make([]byte, h.length)
		if _, err := io.ReadFull(br, body); err != nil {
			return nil, fmt.Errorf("reading body: %w", err)
		}
		return body, nil
	default: // to the end of the connection
		h.keep = false
		body, err := io.ReadAll(io.LimitReader(br, limit+1))
		if err != nil {
			return nil, fmt.Errorf("reading body: %w", err)
		}
		if int64(len(body)) > limit {
			return nil, fmt.Errorf("%w: over %d bytes", errProbeTooLarge, limit)
		}
		return body, nil
	}
}

// readChunked reads a chunked body and its trailers, at most limit bytes
// of data.
func readChunked(br *bufio.Reader, limit int64) ([]byte, error) {
	var body []byte
	for {
		line, err := probeLine(br)
		if err != nil {
			return nil, err
		}
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i] // chunk extensions
		}
		size, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 64)
		if err != nil || size < 0 {
			return nil, errors.New("malformed chunk size")
		}
		if size == 0 {
			break
		}
		if int64(len(body))+size > limit {
			return nil, fmt.Errorf("%w: over %d bytes", errProbeTooLarge, limit)
		}
		n := len(body)
		body = append(body, make([]byte, size)...)
		if _, err := io.ReadFull(br, body[n:]); err != nil {
			return nil, fmt.Errorf("reading body: %w", err)
		}
		if crlf, err := probeLine(br); err != nil || len(crlf) != 0 {
			return nil, errors.New("malformed chunk end")
		}
	}
	for n := 0; ; n++ { // trailers
		line, err := probeLine(br)
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			return body, nil
		}
		if n == probeMaxHeaders {
			return nil, fmt.Errorf("more than %d trailer lines", probeMaxHeaders)
		}
	}
}

// probeLine reads one line, without its CRLF (or LF), of at most
// probeMaxLine bytes. The slice is valid until the next read.
func probeLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, fmt.Errorf("a line over %d bytes", probeMaxLine)
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// close closes the connection, if open, and recycles its buffer.
func (p *probeConn) close() {
	if p.conn == nil {
		return
	}
	_ = p.conn.Close()
	p.conn = nil
	p.br.Reset(nil)
	probeReaders.Put(p.br)
	p.br = nil
}

// asciiEqualFold reports whether b is s, ignoring ASCII case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func truncateBytes(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

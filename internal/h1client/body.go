package h1client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Body framings.
const (
	modeNone    = iota // no body (HEAD, 204, 304, Content-Length: 0)
	modeLength         // Content-Length
	modeChunked        // Transfer-Encoding: chunked
	modeClose          // until the server closes the connection
)

// Chunked body states.
const (
	stSize    = iota // before a chunk-size line
	stData           // inside a chunk's data
	stDataEnd        // before the CRLF after a chunk's data
	stTrailer        // inside the trailer section
	stDone
)

var errClosedBody = errors.New("h1client: read on closed response body")

// body is a response body read from its connection on the caller's
// goroutine. At its end the connection goes back to the pool (or is
// closed, when the answer said so); closed before its end, it is closed.
type body struct {
	c     *Client
	cn    *conn
	ctx   context.Context
	stop  func() bool // unregisters the context's deadline hook
	mode  int
	st    int   // chunked state
	left  int64 // bytes left in the body (length) or the chunk (chunked)
	trail int   // trailer bytes read
	close bool  // the connection is not reused after this answer
	eof   bool  // the end was reached
	done  bool  // the connection was released
	shut  bool  // Close was called
	err   error // sticky read error
}

func (b *body) Read(p []byte) (int, error) {
	switch {
	case b.shut:
		return 0, errClosedBody
	case b.err != nil:
		return 0, b.err
	case b.eof:
		return 0, io.EOF
	case len(p) == 0:
		return 0, nil
	}
	n, err := b.read(p)
	if err != nil && err != io.EOF {
		if b.ctx.Err() != nil {
			err = fmt.Errorf("h1client: %w (%w)", b.ctx.Err(), err)
		}
		b.err = err
	}
	if b.eof {
		b.finish()
		return n, io.EOF
	}
	return n, err
}

func (b *body) read(p []byte) (int, error) {
	br := b.cn.br
	switch b.mode {
	case modeLength:
		n, err := br.Read(p[:min(int64(len(p)), b.left)])
		b.left -= int64(n)
		if b.left == 0 {
			b.eof = true
			return n, nil
		}
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return n, err
	case modeClose:
		n, err := br.Read(p)
		if err == io.EOF {
			b.eof = true
			err = nil
		}
		return n, err
	case modeChunked:
		for b.st != stData {
			if b.st == stDone {
				b.eof = true
				return 0, nil
			}
			if err := b.frame(true); err != nil {
				return 0, err
			}
		}
		n := 0
		for {
			m, err := br.Read(p[n : n+int(min(int64(len(p)-n), b.left))])
			n += m
			b.left -= int64(m)
			if b.left > 0 {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return n, err
			}
			b.st = stDataEnd
			// Read what follows when it is already here, so that the last
			// chunk's end is seen with its data and the connection
			// returns to the pool even if the caller stops reading.
			if ferr := b.frame(false); ferr != nil {
				return n, ferr
			}
			if b.st == stDone {
				b.eof = true
				return n, nil
			}
			// Further chunks already buffered join this read, as with
			// net/http's chunked reader: a stream's reader then sees the
			// events that arrived together at once and the relay flushes
			// them in one write, not one write per chunk. Nothing blocks
			// here: only buffered bytes are taken.
			if b.st != stData || n == len(p) || br.Buffered() == 0 {
				return n, nil
			}
		}
	}
	b.eof = true
	return 0, nil
}

// frame reads chunk framing (a data CRLF, a size line, trailers) up to the
// next data or the end; without block, only as far as whole lines are
// already buffered.
func (b *body) frame(block bool) error {
	for {
		var line []byte
		var err error
		switch b.st {
		case stDataEnd, stSize, stTrailer:
			if line, err = b.line(block); err != nil || line == nil {
				return err
			}
		default:
			return nil
		}
		switch b.st {
		case stDataEnd:
			if len(line) != 0 {
				return fmt.Errorf("%w: no CRLF after chunk data", ErrMalformed)
			}
			b.st = stSize
		case stSize:
			if i := bytes.IndexByte(line, ';'); i >= 0 {
				line = line[:i] // chunk extensions are ignored
			}
			n, err := strconv.ParseUint(string(bytes.TrimSpace(line)), 16, 62)
			if err != nil {
				return fmt.Errorf("%w: chunk size %q", ErrMalformed, capQuote(line))
			}
			if n == 0 {
				b.st = stTrailer
				continue
			}
			b.left, b.st = int64(n), stData
			return nil
		case stTrailer:
			if len(line) == 0 {
				b.st = stDone
				return nil
			}
			if b.trail += len(line); b.trail > maxTrailer {
				return fmt.Errorf("%w: trailers", ErrHeaderTooLarge)
			}
		}
	}
}

// line reads one framing line without its terminator; nil, nil when block
// is false and no whole line is buffered.
func (b *body) line(block bool) ([]byte, error) {
	br := b.cn.br
	if !block {
		buf, _ := br.Peek(br.Buffered())
		if bytes.IndexByte(buf, '\n') < 0 {
			return nil, nil
		}
	}
	line, err := br.ReadSlice('\n')
	switch {
	case err == bufio.ErrBufferFull || len(line) > maxChunkLine:
		return nil, errChunkLine
	case err == io.EOF:
		return nil, io.ErrUnexpectedEOF
	case err != nil:
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// Wait blocks until a Read would not wait on the upstream: bytes are
// buffered, the connection has some to read or was closed, or the
// request's context ended it. While it waits the connection holds no read
// buffer, so a stream that waits long between events (an idle stream,
// issue 21) costs its connection and no more. Wait reports nothing: the
// Read that follows returns whatever error there is. Where the
// connection cannot be waited on without reading (TLS, other systems),
// Wait returns at once and the Read waits as usual.
func (b *body) Wait() {
	if b.shut || b.err != nil || b.eof || b.done {
		return
	}
	cn := b.cn
	if cn.br.Buffered() > 0 {
		return
	}
	cn.releaseReader()
	waitReadable(cn.nc)
	cn.takeReader()
}

// finish releases the connection after the body's end: back to the pool
// when the exchange ended cleanly, else closed.
func (b *body) finish() {
	if b.done {
		return
	}
	b.done = true
	cn := b.cn
	reusable := !b.close && cn.br.Buffered() == 0
	if b.stop != nil && !b.stop() {
		reusable = false // the context fired: its deadline is on the connection
	}
	if !reusable {
		cn.close()
		return
	}
	cn.releaseReader()
	b.c.put(cn)
}

// Close ends the body; before its end, the connection is closed.
func (b *body) Close() error {
	if b.shut {
		return nil
	}
	b.shut = true
	if b.done {
		return nil
	}
	if b.eof {
		b.finish()
		return nil
	}
	if b.mode == modeChunked && b.err == nil && !b.close && b.st != stData {
		// Stopped at a chunk boundary: a stream's reader has its last
		// event, and the chunked end follows at once, if it is not
		// already here. Waiting for it keeps the connection.
		b.awaitEnd()
		return nil
	}
	b.abandon()
	return nil
}

// endWait bounds how long Close waits for a stream's chunked end before
// it closes the connection instead of pooling it. net/http's Transport
// waits likewise (it drains up to 256 KiB).
const endWait = 250 * time.Millisecond

// awaitEnd reads a closed body's remaining chunk framing, up to endWait
// (the context still cuts it short), and pools the connection when the
// body ends there with no more data.
func (b *body) awaitEnd() {
	nc := b.cn.nc
	if b.frame(false) != nil {
		b.abandon()
		return
	}
	if b.st != stDone {
		_ = nc.SetReadDeadline(time.Now().Add(endWait))
		for b.st != stDone && b.st != stData {
			if b.frame(true) != nil {
				break
			}
		}
		if b.st != stDone || nc.SetReadDeadline(time.Time{}) != nil {
			b.abandon()
			return
		}
	}
	b.eof = true
	b.finish()
}

// abandon closes the connection of a body that did not end cleanly.
func (b *body) abandon() {
	b.done = true
	if b.stop != nil {
		b.stop()
	}
	b.cn.close()
}

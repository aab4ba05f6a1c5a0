// Package h1client is rolter's upstream HTTP/1.1 client: an
// http.RoundTripper that does a request's whole exchange on the caller's
// goroutine (issue 21).
//
// net/http's Transport runs two goroutines per connection (a read loop and
// a write loop) and hands every request and response between them and the
// caller; on a small machine those wake-ups cost more CPU than the rest of
// a gateway's request. Here the caller writes the request, reads the
// response head and then the body itself, and a kept-alive connection
// waits in the pool with no goroutine and no buffer. A context's
// cancellation reaches a blocked read or write through the connection's
// deadline (context.AfterFunc), so cancelling a request needs no watcher
// goroutine either.
//
// What it does: keep-alive pooling per scheme and host (LIFO, bounded per
// host and in all, idle connections closed after IdleTimeout), plain TCP
// and TLS (HTTP/1.1 only), Content-Length, chunked and read-until-close
// response framing, 1xx responses skipped, Connection: close honoured
// (the response's, and req.Close: that connection is never pooled).
// What it does not: redirects (a 3xx is returned like any answer),
// proxies, HTTP/2, compression, Expect: 100-continue, request trailers.
// Every length an upstream chooses is capped: a response head line, the
// whole head, the header count, a chunk-size line, trailers.
//
// A connection is reused only after its response body was read to its end
// and closed. Before a pooled connection is reused, a non-blocking peek
// (Linux) tells whether the server closed it while idle, so that a request
// is never written to a connection already gone; nothing written is ever
// retried.
package h1client

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Config tunes a Client. Zero values take the defaults shown.
type Config struct {
	// Dial opens a TCP connection (default: a net.Dialer with a 30 s
	// timeout and keep-alive).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLS is the base configuration for https upstreams (default: system
	// roots); ServerName and NextProtos are set per host.
	TLS                *tls.Config
	MaxIdlePerHost     int           // default 256
	MaxIdle            int           // all hosts together (default 1024)
	IdleTimeout        time.Duration // a pooled connection is closed after this (default 90s)
	MaxResponseHeaders int           // bytes of a response head, status line included (default 64 KiB)
	MaxHeaderCount     int           // header fields of a response head (default 256)
}

func (c *Config) defaults() {
	if c.Dial == nil {
		c.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	if c.MaxIdlePerHost <= 0 {
		c.MaxIdlePerHost = 256
	}
	if c.MaxIdle <= 0 {
		c.MaxIdle = 1024
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 90 * time.Second
	}
	if c.MaxResponseHeaders <= 0 {
		c.MaxResponseHeaders = 64 << 10
	}
	if c.MaxHeaderCount <= 0 {
		c.MaxHeaderCount = 256
	}
}

// Errors of a response the client refuses to read.
var (
	ErrHeaderTooLarge = errors.New("h1client: response head exceeds the limit")
	ErrMalformed      = errors.New("h1client: malformed response")
	errChunkLine      = errors.New("h1client: chunk-size line too long")
)

// maxChunkLine caps a chunk-size line (size and extensions); maxTrailer the
// trailer section of a chunked body.
const (
	maxChunkLine = 1 << 10
	maxTrailer   = 16 << 10
	brSize       = 1 << 10 // held by a stream while it waits; longer head lines are gathered
	bwSize       = 4 << 10
)

// Client is an HTTP/1.1 RoundTripper. It is safe for concurrent use.
type Client struct {
	cfg Config

	mu      sync.Mutex
	idle    map[string][]*conn // by pool key, most recently used last
	nidle   int
	janitor *time.Timer // armed while any connection is idle
}

// New returns a Client.
func New(cfg Config) *Client {
	cfg.defaults()
	return &Client{cfg: cfg, idle: map[string][]*conn{}}
}

var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, brSize) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, bwSize) }}
)

// conn is one upstream connection. While a request uses it, only that
// request's goroutine touches it.
type conn struct {
	nc     net.Conn
	key    string
	br     *bufio.Reader // from readers while a response is read; nil when idle
	idleAt time.Time
}

// RoundTrip sends req and reads the response head. The body is read from
// the connection as the caller reads it; closing it before its end closes
// the connection. req.Context cancels the exchange at any point.
func (c *Client) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		// A RoundTripper closes the body, on errors too (write closes it
		// as well; closing twice is harmless for request bodies).
		defer req.Body.Close()
	}
	ctx := req.Context()
	if req.URL == nil || req.URL.Host == "" {
		return nil, errors.New("h1client: request without a host")
	}
	scheme := req.URL.Scheme
	if scheme != "http" && scheme != "https" {
		return nil, fmt.Errorf("h1client: unsupported scheme %q", scheme)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	addr := canonicalAddr(req.URL.Host, scheme)
	key := scheme + "://" + addr
	cn, err := c.get(key)
	if err != nil {
		return nil, err
	}
	if cn == nil {
		if cn, err = c.dial(ctx, scheme, addr, req.URL.Hostname(), key); err != nil {
			return nil, err
		}
	}
	// A cancelled context sets a deadline in the past: a blocked read or
	// write returns at once, and the error becomes the context's.
	stop := context.AfterFunc(ctx, func() { _ = cn.nc.SetDeadline(aLongTimeAgo) })
	resp, err := c.exchange(ctx, cn, req)
	if err != nil {
		stop()
		cn.close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("h1client: %w (%w)", ctx.Err(), err)
		}
		return nil, err
	}
	b := resp.Body.(*body)
	b.ctx, b.stop = ctx, stop
	if b.eof { // no body: the connection is free now
		b.finish()
	}
	return resp, nil
}

var aLongTimeAgo = time.Unix(1, 0)

// closes reports whether req asked for its connection to be closed after
// it: req.Close, or a Connection: close header the caller set.
func closes(req *http.Request) bool {
	return req.Close || hasToken(req.Header["Connection"], "close")
}

// canonicalAddr is host with the scheme's port when it has none.
func canonicalAddr(host, scheme string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if scheme == "https" {
		return net.JoinHostPort(h, "443")
	}
	return net.JoinHostPort(h, "80")
}

func (c *Client) dial(ctx context.Context, scheme, addr, host, key string) (*conn, error) {
	nc, err := c.cfg.Dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if scheme == "https" {
		cfg := &tls.Config{}
		if c.cfg.TLS != nil {
			cfg = c.cfg.TLS.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = host
		}
		cfg.NextProtos = []string{"http/1.1"}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		nc = tc
	}
	return &conn{nc: nc, key: key}, nil
}

// exchange writes req on cn and reads the response head.
func (c *Client) exchange(ctx context.Context, cn *conn, req *http.Request) (*http.Response, error) {
	if err := c.write(cn, req); err != nil {
		return nil, err
	}
	if t := httptrace.ContextClientTrace(ctx); t != nil && t.WroteRequest != nil {
		t.WroteRequest(httptrace.WroteRequestInfo{})
	}
	cn.takeReader()
	for range 8 { // 1xx answers before the final one, bounded
		resp, err := c.readHead(cn, req)
		if err != nil {
			return nil, err
		}
		if resp != nil {
			return resp, nil
		}
	}
	return nil, fmt.Errorf("%w: too many 1xx responses", ErrMalformed)
}

// write sends the request line, headers and body through a pooled buffer
// (its write errors are sticky and come back from Flush):
// one write for a head and a small body.
func (c *Client) write(cn *conn, req *http.Request) error {
	bw := writers.Get().(*bufio.Writer)
	bw.Reset(cn.nc)
	defer func() { bw.Reset(nil); writers.Put(bw) }()
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if !httpguts.ValidHostHeader(host) || !validToken(method) {
		return errors.New("h1client: invalid method or host")
	}
	uri := req.URL.RequestURI()
	if strings.ContainsAny(uri, " \r\n") {
		return errors.New("h1client: invalid request URI")
	}
	_, _ = bw.WriteString(method)
	_ = bw.WriteByte(' ')
	_, _ = bw.WriteString(uri)
	_, _ = bw.WriteString(" HTTP/1.1\r\nHost: ")
	_, _ = bw.WriteString(host)
	_, _ = bw.WriteString("\r\n")
	for k, vs := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("h1client: invalid header name %q", k)
		}
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection":
			continue // the client's own
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("h1client: invalid value of header %s", k)
			}
			_, _ = bw.WriteString(k)
			_, _ = bw.WriteString(": ")
			_, _ = bw.WriteString(v)
			_, _ = bw.WriteString("\r\n")
		}
	}
	if closes(req) {
		_, _ = bw.WriteString("Connection: close\r\n")
	}
	body := req.Body
	if body == http.NoBody {
		body = nil
	}
	if body == nil && req.ContentLength > 0 {
		return fmt.Errorf("h1client: a Content-Length of %d with no body", req.ContentLength)
	}
	chunked := body != nil && req.ContentLength <= 0
	switch {
	case chunked:
		_, _ = bw.WriteString("Transfer-Encoding: chunked\r\n\r\n")
	case body != nil || req.ContentLength > 0 || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch:
		_, _ = bw.WriteString("Content-Length: ")
		_, _ = bw.WriteString(strconv.FormatInt(max(req.ContentLength, 0), 10))
		_, _ = bw.WriteString("\r\n\r\n")
	default:
		_, _ = bw.WriteString("\r\n")
	}
	if body != nil {
		defer body.Close()
		if chunked {
			if err := writeChunked(bw, body); err != nil {
				return err
			}
		} else {
			n, err := io.Copy(bw, io.LimitReader(body, req.ContentLength))
			if err != nil {
				return err
			}
			if n != req.ContentLength {
				return fmt.Errorf("h1client: request body has %d bytes, ContentLength %d", n, req.ContentLength)
			}
		}
	}
	return bw.Flush()
}

func writeChunked(bw *bufio.Writer, body io.Reader) error {
	buf := make([]byte, 16<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			_, _ = bw.WriteString(strconv.FormatInt(int64(n), 16))
			_, _ = bw.WriteString("\r\n")
			_, _ = bw.Write(buf[:n])
			_, _ = bw.WriteString("\r\n")
		}
		if err == io.EOF {
			_, err = bw.WriteString("0\r\n\r\n")
			return err
		}
		if err != nil {
			return err
		}
	}
}

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !httpguts.IsTokenRune(rune(s[i])) {
			return false
		}
	}
	return true
}

// readHead reads one response head; nil, nil for a 1xx answer to skip.
func (c *Client) readHead(cn *conn, req *http.Request) (*http.Response, error) {
	budget := c.cfg.MaxResponseHeaders
	line, err := readLine(cn.br, &budget)
	if err != nil {
		return nil, err
	}
	resp := &http.Response{Request: req, Header: http.Header{}}
	proto, rest, ok := strings.Cut(string(line), " ")
	code, _, _ := strings.Cut(rest, " ")
	if !ok || len(code) != 3 {
		return nil, fmt.Errorf("%w: status line %q", ErrMalformed, capQuote(line))
	}
	switch proto {
	case "HTTP/1.1":
		resp.ProtoMinor = 1
	case "HTTP/1.0":
		resp.Close = true
	default:
		return nil, fmt.Errorf("%w: protocol %q", ErrMalformed, capQuote([]byte(proto)))
	}
	resp.Proto, resp.ProtoMajor = proto, 1
	if resp.StatusCode, err = strconv.Atoi(code); err != nil || resp.StatusCode < 100 {
		return nil, fmt.Errorf("%w: status %q", ErrMalformed, code)
	}
	resp.Status = rest
	for n := 0; ; n++ {
		line, err := readLine(cn.br, &budget)
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			break
		}
		if n >= c.cfg.MaxHeaderCount {
			return nil, fmt.Errorf("%w: more than %d header fields", ErrHeaderTooLarge, c.cfg.MaxHeaderCount)
		}
		k, v, ok := cutHeader(line)
		if !ok {
			return nil, fmt.Errorf("%w: header line %q", ErrMalformed, capQuote(line))
		}
		key := canonicalKey(k)
		resp.Header[key] = append(resp.Header[key], string(v))
	}
	if resp.StatusCode < 200 {
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return nil, fmt.Errorf("%w: unexpected 101", ErrMalformed)
		}
		return nil, nil
	}
	if hasToken(resp.Header["Connection"], "close") {
		resp.Close = true
	}
	b := &body{c: c, cn: cn}
	resp.Body = b
	resp.ContentLength = -1
	te := resp.Header["Transfer-Encoding"]
	cl := resp.Header["Content-Length"]
	switch {
	case req.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified:
		b.mode, resp.ContentLength = modeNone, 0
	case len(te) > 0:
		if len(te) != 1 || !strings.EqualFold(strings.TrimSpace(te[0]), "chunked") {
			return nil, fmt.Errorf("%w: transfer-encoding %q", ErrMalformed, capQuote([]byte(strings.Join(te, ","))))
		}
		b.mode, resp.TransferEncoding = modeChunked, []string{"chunked"}
		if len(cl) > 0 {
			resp.Close = true // both framings: trust neither for reuse
			delete(resp.Header, "Content-Length")
		}
	case len(cl) > 0:
		n, err := strconv.ParseInt(strings.TrimSpace(cl[0]), 10, 64)
		for _, v := range cl[1:] {
			if strings.TrimSpace(v) != strings.TrimSpace(cl[0]) {
				err = errors.New("differing values")
			}
		}
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w: content-length %q", ErrMalformed, capQuote([]byte(strings.Join(cl, ","))))
		}
		b.mode, b.left, resp.ContentLength = modeLength, n, n
	default:
		b.mode, resp.Close = modeClose, true
	}
	// A request that asked to close (req.Close, written as Connection:
	// close) does not leave its connection pooled, whatever the server
	// answered.
	b.close = resp.Close || closes(req)
	b.eof = b.mode == modeNone || (b.mode == modeLength && b.left == 0)
	return resp, nil
}

// readLine reads one CRLF- or LF-terminated line without its terminator,
// charging it to budget. The slice is valid until the next read of br.
func readLine(br *bufio.Reader, budget *int) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		// A line longer than the buffer: gather it, within the budget.
		long := append([]byte(nil), line...)
		for err == bufio.ErrBufferFull {
			if len(long) > *budget {
				return nil, ErrHeaderTooLarge
			}
			line, err = br.ReadSlice('\n')
			long = append(long, line...)
		}
		line = long
	}
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if *budget -= len(line); *budget < 0 {
		return nil, ErrHeaderTooLarge
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// cutHeader splits "Name: value", refusing a name that is not a token and
// obsolete line folding.
func cutHeader(line []byte) (k, v []byte, ok bool) {
	i := 0
	for i < len(line) && line[i] != ':' {
		if !httpguts.IsTokenRune(rune(line[i])) {
			return nil, nil, false
		}
		i++
	}
	if i == 0 || i == len(line) {
		return nil, nil, false
	}
	v = line[i+1:]
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return line[:i], v, true
}

// commonKeys are the header names upstreams send on every answer, so that
// their canonical keys cost no allocation.
var commonKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"Content-Type", "Content-Length", "Transfer-Encoding", "Connection", "Date", "Server",
		"Cache-Control", "Retry-After", "Content-Encoding", "Content-Language", "X-Request-Id", "Keep-Alive", "Vary"} {
		m[k] = k
		m[strings.ToLower(k)] = k
	}
	return m
}()

func canonicalKey(k []byte) string {
	if s, ok := commonKeys[string(k)]; ok { // no allocation: map lookup by []byte conversion
		return s
	}
	return http.CanonicalHeaderKey(string(k))
}

func hasToken(vs []string, tok string) bool {
	for _, v := range vs {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), tok) {
				return true
			}
		}
	}
	return false
}

func capQuote(b []byte) string {
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// get pops a pooled connection for key that the server has not closed;
// nil when there is none.
func (c *Client) get(key string) (*conn, error) {
	now := time.Now()
	for {
		c.mu.Lock()
		list := c.idle[key]
		if len(list) == 0 {
			c.mu.Unlock()
			return nil, nil
		}
		cn := list[len(list)-1]
		list[len(list)-1] = nil
		c.idle[key] = list[:len(list)-1]
		c.nidle--
		c.mu.Unlock()
		if now.Sub(cn.idleAt) > c.cfg.IdleTimeout || !alive(cn.nc) {
			cn.nc.Close()
			continue
		}
		return cn, nil
	}
}

// put returns a connection whose exchange ended cleanly to the pool.
func (c *Client) put(cn *conn) {
	cn.idleAt = time.Now()
	c.mu.Lock()
	list := c.idle[cn.key]
	if len(list) >= c.cfg.MaxIdlePerHost || c.nidle >= c.cfg.MaxIdle {
		c.mu.Unlock()
		cn.nc.Close()
		return
	}
	c.idle[cn.key] = append(list, cn)
	c.nidle++
	if c.janitor == nil {
		c.janitor = time.AfterFunc(c.cfg.IdleTimeout, c.sweep)
	}
	c.mu.Unlock()
}

// sweep closes connections idle longer than IdleTimeout; it runs while
// any connection is pooled.
func (c *Client) sweep() {
	cutoff := time.Now().Add(-c.cfg.IdleTimeout)
	var old []*conn
	c.mu.Lock()
	for k, list := range c.idle {
		keep := list[:0]
		for _, cn := range list {
			if cn.idleAt.Before(cutoff) {
				old = append(old, cn)
			} else {
				keep = append(keep, cn)
			}
		}
		clear(list[len(keep):])
		if len(keep) == 0 {
			delete(c.idle, k)
		} else {
			c.idle[k] = keep
		}
	}
	c.nidle -= len(old)
	if c.nidle > 0 {
		c.janitor.Reset(c.cfg.IdleTimeout / 2)
	} else {
		c.janitor = nil
	}
	c.mu.Unlock()
	for _, cn := range old {
		cn.nc.Close()
	}
}

// CloseIdleConnections closes every pooled connection.
func (c *Client) CloseIdleConnections() {
	c.mu.Lock()
	idle := c.idle
	c.idle, c.nidle = map[string][]*conn{}, 0
	if c.janitor != nil {
		c.janitor.Stop()
		c.janitor = nil
	}
	c.mu.Unlock()
	for _, list := range idle {
		for _, cn := range list {
			cn.nc.Close()
		}
	}
}

// takeReader gives the connection a read buffer, for reading a response.
//
//go:noinline
func (cn *conn) takeReader() {
	cn.br = readers.Get().(*bufio.Reader)
	cn.br.Reset(cn.nc)
}

// releaseReader gives the connection's read buffer back; a connection
// holds one only while a response is read, and a stream's not while it
// waits (body.Wait). Not inlined: the frames of waiting streams stay small.
//
//go:noinline
func (cn *conn) releaseReader() {
	if cn.br != nil {
		cn.br.Reset(nil)
		readers.Put(cn.br)
		cn.br = nil
	}
}

func (cn *conn) close() {
	cn.releaseReader()
	cn.nc.Close()
}

package h1client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/iotest"
	"time"
)

// counted is an httptest server that counts the connections it accepted.
func counted(t *testing.T, h http.Handler) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &n
}

func post(t *testing.T, c *Client, ctx context.Context, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// sseHandler streams n events, flushing each, then [DONE].
func sseHandler(n int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range n {
			fmt.Fprintf(w, "data: {\"i\":%d}\n\n", i)
			w.(http.Flusher).Flush()
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
		w.(http.Flusher).Flush()
	}
}

func TestKeepAliveContentLength(t *testing.T) {
	srv, conns := counted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo-Type", r.Header.Get("Content-Type"))
		_, _ = w.Write(append([]byte("got "), b...))
	}))
	c := New(Config{})
	defer c.CloseIdleConnections()
	for i := range 20 {
		resp := post(t, c, context.Background(), srv.URL+"/x?q=1", fmt.Sprintf(`{"n":%d}`, i))
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != fmt.Sprintf(`got {"n":%d}`, i) || resp.StatusCode != 200 || resp.ContentLength != int64(len(b)) {
			t.Fatalf("request %d: %d %v %q (length %d)", i, resp.StatusCode, err, b, resp.ContentLength)
		}
		if got := resp.Header.Get("X-Echo-Type"); got != "application/json" {
			t.Fatalf("headers not sent: %q", got)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 20 sequential requests, want 1 (keep-alive)", n)
	}
}

// TestStreamKeepsConnection: a reader that stops at [DONE] and closes the
// body still leaves the connection to the pool, and each event is readable
// before the next is sent.
func TestStreamKeepsConnection(t *testing.T) {
	srv, conns := counted(t, sseHandler(24))
	c := New(Config{})
	defer c.CloseIdleConnections()
	for range 20 {
		resp := post(t, c, context.Background(), srv.URL, `{}`)
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("stream ended before [DONE]: %v", err)
			}
			if line == "data: [DONE]\n" {
				break
			}
		}
		resp.Body.Close()
	}
	// The last connection may still be waiting for its chunked end.
	deadline := time.Now().Add(30 * time.Second)
	for conns.Load() > 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := conns.Load(); n > 2 {
		t.Fatalf("%d connections for 20 streams closed at [DONE], want them reused", n)
	}
}

func TestStreamEventsArriveOneByOne(t *testing.T) {
	next := make(chan struct{})
	srv, _ := counted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			<-next
		}
	}))
	c := New(Config{})
	defer c.CloseIdleConnections()
	resp := post(t, c, context.Background(), srv.URL, `{}`)
	defer resp.Body.Close()
	buf := make([]byte, 64)
	for i := range 3 {
		n, err := resp.Body.Read(buf)
		if err != nil || string(buf[:n]) != fmt.Sprintf("data: %d\n\n", i) {
			t.Fatalf("event %d: %q %v", i, buf[:n], err)
		}
		next <- struct{}{}
	}
	if b, err := io.ReadAll(resp.Body); err != nil || len(b) != 0 {
		t.Fatalf("after the last event: %q %v", b, err)
	}
}

// TestServerClosedIdleConnection: a pooled connection the server closed is
// noticed before a request is written to it.
func TestServerClosedIdleConnection(t *testing.T) {
	srv, conns := counted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	c := New(Config{})
	defer c.CloseIdleConnections()
	for i := range 5 {
		resp := post(t, c, context.Background(), srv.URL, `{}`)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != "ok" {
			t.Fatalf("request %d: %q %v", i, b, err)
		}
		srv.CloseClientConnections() // the server drops its idle side
		deadline := time.Now().Add(30 * time.Second)
		for c.pooledAlive() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if n := conns.Load(); n != 5 {
		t.Fatalf("%d connections, want 5 (one per request)", n)
	}
}

// pooledAlive reports whether any pooled connection still looks alive.
func (c *Client) pooledAlive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, list := range c.idle {
		for _, cn := range list {
			if alive(cn.nc) {
				return true
			}
		}
	}
	return false
}

func TestChunkedTrailersAndExtensions(t *testing.T) {
	addr := rawServer(t, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n")
	c := New(Config{})
	resp := post(t, c, context.Background(), "http://"+addr+"/", `{}`)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "hello world" || resp.ContentLength != -1 {
		t.Fatalf("%q %v", b, err)
	}
}

func TestInformationalSkipped(t *testing.T) {
	addr := rawServer(t, "HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok")
	resp := post(t, New(Config{}), context.Background(), "http://"+addr+"/", `{}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 || string(b) != "ok" || resp.Header.Get("Link") != "" {
		t.Fatalf("%d %q %v", resp.StatusCode, b, resp.Header)
	}
}

func TestReadUntilClose(t *testing.T) {
	addr := rawServer(t, "HTTP/1.0 200 OK\r\n\r\nall of it")
	resp := post(t, New(Config{}), context.Background(), "http://"+addr+"/", `{}`)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "all of it" || !resp.Close {
		t.Fatalf("%q %v close=%v", b, err, resp.Close)
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	srv, _ := counted(t, http.RedirectHandler("http://169.254.169.254/", http.StatusFound))
	resp := post(t, New(Config{}), context.Background(), srv.URL, `{}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") == "" {
		t.Fatalf("%d %v: want the 302 itself", resp.StatusCode, resp.Header)
	}
}

// TestBoundedHead: every length an upstream picks in a head is capped.
func TestBoundedHead(t *testing.T) {
	many := strings.Repeat("X-A: b\r\n", 300)
	for name, c := range map[string]struct {
		answer string
		want   error
	}{
		"long header line": {"HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 70<<10) + "\r\n\r\n", ErrHeaderTooLarge},
		"many headers":     {"HTTP/1.1 200 OK\r\n" + many + "\r\n", ErrHeaderTooLarge},
		"bad status line":  {"SMTP ready\r\n\r\n", ErrMalformed},
		"bad header":       {"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", ErrMalformed},
		"two lengths":      {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", ErrMalformed},
		"gzip framing":     {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", ErrMalformed},
		"too many 1xx":     {strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 10), ErrMalformed},
	} {
		addr := rawServer(t, c.answer)
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader("{}"))
		resp, err := New(Config{}).RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	// A chunk-size line without end.
	addr := rawServer(t, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"+strings.Repeat("a", 8<<10))
	resp := post(t, New(Config{}), context.Background(), "http://"+addr+"/", `{}`)
	_, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, errChunkLine) {
		t.Fatalf("long chunk line: %v", err)
	}
}

func TestTruncatedBodies(t *testing.T) {
	for name, answer := range map[string]string{
		"length":  "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
		"chunked": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
	} {
		addr := rawServer(t, answer)
		resp := post(t, New(Config{}), context.Background(), "http://"+addr+"/", `{}`)
		_, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: %v, want unexpected EOF", name, err)
		}
	}
}

// TestCancelWakesBlockedReads: cancelling the context ends a wait for the
// head and a wait inside the body, with the context's error.
func TestCancelWakesBlockedReads(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv, _ := counted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/body" {
			_, _ = io.WriteString(w, "data: 1\n\n")
			w.(http.Flusher).Flush()
		}
		<-release
	}))
	c := New(Config{})
	for _, path := range []string{"/head", "/body"} {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+path, strings.NewReader("{}"))
		started := make(chan struct{})
		errc := make(chan error, 1)
		go func() {
			resp, err := c.RoundTrip(req)
			if err == nil {
				buf := make([]byte, 64)
				_, err = resp.Body.Read(buf) // the first event
				close(started)
				if err == nil {
					_, err = io.ReadAll(resp.Body)
				}
				resp.Body.Close()
			}
			errc <- err
		}()
		if path == "/body" {
			<-started // cancel while the body's read waits
		}
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s: %v, want context.Canceled", path, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s: cancel did not end the exchange", path)
		}
	}
}

func TestRefusedDialIsECONNREFUSED(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader("{}"))
	_, err = New(Config{}).RoundTrip(req)
	var op *net.OpError
	if !errors.Is(err, syscall.ECONNREFUSED) || !errors.As(err, &op) || op.Op != "dial" {
		t.Fatalf("%v, want a dial error wrapping ECONNREFUSED", err)
	}
}

func TestTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "secure") }))
	defer srv.Close()
	c := New(Config{TLS: srv.Client().Transport.(*http.Transport).TLSClientConfig})
	defer c.CloseIdleConnections()
	for range 3 {
		resp := post(t, c, context.Background(), srv.URL, `{}`)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != "secure" || resp.ProtoMinor != 1 {
			t.Fatalf("%q %v", b, err)
		}
	}
}

func TestRefusesHeaderInjection(t *testing.T) {
	srv, _ := counted(t, http.NotFoundHandler())
	req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader([]byte("{}")))
	req.Header["X-Evil"] = []string{"a\r\nX-Injected: 1"}
	if _, err := New(Config{}).RoundTrip(req); err == nil {
		t.Fatal("a header value with CRLF was sent")
	}
}

// rawServer answers every connection with answer, byte for byte, after
// reading the request head and its Content-Length body.
func rawServer(t *testing.T, answer string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				req, err := http.ReadRequest(bufio.NewReader(nc))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				_, _ = io.WriteString(nc, answer)
			}()
		}
	}()
	return ln.Addr().String()
}

// chunkedBody is a chunked body read from wire through src, on a
// connection that is closed at the end (nothing is pooled).
func chunkedBody(src io.Reader) *body {
	nc, peer := net.Pipe()
	_ = peer.Close()
	cn := &conn{nc: nc, br: bufio.NewReaderSize(src, brSize)}
	return &body{c: New(Config{}), cn: cn, mode: modeChunked, close: true, ctx: context.Background()}
}

// TestChunksAlreadyBufferedJoinOneRead: chunks that arrived together come
// back from one Read, as from net/http's chunked reader, so that a relay
// sees the events that came together at once and flushes them in one
// write (issue 21: a flush per chunk cost the streamed relay CPU).
func TestChunksAlreadyBufferedJoinOneRead(t *testing.T) {
	const wire = "b\r\ndata: a\n\nxx\r\n" + "b\r\ndata: b\n\nyy\r\n" + "e;ext=1\r\ndata: [DONE]\n\n\r\n" + "0\r\n\r\n"
	const want = "data: a\n\nxx" + "data: b\n\nyy" + "data: [DONE]\n\n"
	b := chunkedBody(strings.NewReader(wire))
	p := make([]byte, 256)
	n, err := b.Read(p)
	if string(p[:n]) != want || err != io.EOF {
		t.Fatalf("one read of three buffered chunks: %q %v, want %q and EOF", p[:n], err, want)
	}

	// However the bytes arrive and however small the reads, the data is
	// the same and the framing is never part of it.
	for name, src := range map[string]func(io.Reader) io.Reader{
		"one byte at a time": iotest.OneByteReader,
		"halves":             iotest.HalfReader,
		"whole":              func(r io.Reader) io.Reader { return r },
	} {
		for _, size := range []int{1, 3, 13, 14, 256} {
			b := chunkedBody(src(strings.NewReader(wire)))
			var got []byte
			buf := make([]byte, size)
			for range 1000 {
				n, err := b.Read(buf)
				got = append(got, buf[:n]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("%s, reads of %d: %v", name, size, err)
				}
			}
			if string(got) != want {
				t.Fatalf("%s, reads of %d: %q, want %q", name, size, got, want)
			}
		}
	}
}

// TestRequestCloseNotPooled: a request that asks to close, by req.Close
// or by a Connection: close header the caller set, closes its connection
// even when the server answers keep-alive.
func TestRequestCloseNotPooled(t *testing.T) {
	for _, viaHeader := range []bool{false, true} {
		t.Run(map[bool]string{false: "req.Close", true: "header"}[viaHeader], func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			heads := make(chan string, 4)
			closed := make(chan struct{}, 4)
			go func() {
				for {
					nc, err := ln.Accept()
					if err != nil {
						return
					}
					go func() {
						defer nc.Close()
						br := bufio.NewReader(nc)
						for {
							var head strings.Builder
							for {
								line, err := br.ReadString('\n')
								if err != nil {
									closed <- struct{}{} // the client hung up
									return
								}
								head.WriteString(line)
								if line == "\r\n" {
									break
								}
							}
							heads <- head.String()
							// Keep-alive framing, whatever the request asked.
							if _, err := io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
								return
							}
						}
					}()
				}
			}()
			c := New(Config{})
			defer c.CloseIdleConnections()
			get := func(closeConn bool) {
				viaHeader := viaHeader && closeConn
				t.Helper()
				req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+ln.Addr().String()+"/v1/models", nil)
				if err != nil {
					t.Fatal(err)
				}
				if viaHeader {
					req.Header.Set("Connection", "close")
				} else {
					req.Close = closeConn
				}
				resp, err := c.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(b) != "ok" {
					t.Fatalf("%q, %v", b, err)
				}
			}
			get(false)
			if h := <-heads; strings.Contains(h, "Connection: close") {
				t.Fatalf("a keep-alive request asked to close: %q", h)
			}
			get(true) // on the pooled connection
			if h := <-heads; !strings.Contains(h, "Connection: close\r\n") {
				t.Fatalf("req.Close not sent: %q", h)
			}
			select {
			case <-closed:
			case <-time.After(time.Minute):
				t.Fatal("the connection of a req.Close request was not closed")
			}
			c.mu.Lock()
			n := c.nidle
			c.mu.Unlock()
			if n != 0 {
				t.Fatalf("%d idle connections after a req.Close request; want none", n)
			}
		})
	}
}

// TestContentLengthWithoutBody: a Content-Length with no body is refused
// before anything is sent, instead of leaving the upstream waiting.
func TestContentLengthWithoutBody(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c := New(Config{})
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://"+ln.Addr().String()+"/v1/chat/completions", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 10
	if resp, err := c.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "Content-Length of 10 with no body") {
		if resp != nil {
			resp.Body.Close()
		}
		t.Fatalf("want a refusal, got %v", err)
	}
}

// TestWaitBetweenEvents: Wait returns when the next event arrives, at once
// when bytes are already buffered, and when the request is cancelled; the
// connection, whose read buffer Wait gives up, is pooled after the stream.
func TestWaitBetweenEvents(t *testing.T) {
	next := make(chan struct{})
	srv, conns := counted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: 0\n\ndata: 1\n\n") // two events, one flush
		w.(http.Flusher).Flush()
		if r.URL.Path == "/hang" {
			<-r.Context().Done()
			return
		}
		<-next
		_, _ = io.WriteString(w, "data: 2\n\n")
	}))
	c := New(Config{})
	defer c.CloseIdleConnections()
	wait := func(b io.Reader) {
		t.Helper()
		done := make(chan struct{})
		go func() { b.(interface{ Wait() }).Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("Wait did not return")
		}
	}
	resp := post(t, c, context.Background(), srv.URL, `{}`)
	buf := make([]byte, 9)
	if n, err := io.ReadFull(resp.Body, buf); err != nil || string(buf[:n]) != "data: 0\n\n" {
		t.Fatalf("event 0: %q %v", buf[:n], err)
	}
	wait(resp.Body) // event 1 is buffered
	if n, err := io.ReadFull(resp.Body, buf); err != nil || string(buf[:n]) != "data: 1\n\n" {
		t.Fatalf("event 1: %q %v", buf[:n], err)
	}
	go func() { next <- struct{}{} }()
	wait(resp.Body) // until event 2 arrives
	if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "data: 2\n\n" {
		t.Fatalf("event 2: %q %v", b, err)
	}
	resp.Body.Close()
	wait(resp.Body) // a closed body does not wait
	resp = post(t, c, context.Background(), srv.URL, `{}`)
	_, _ = io.ReadFull(resp.Body, buf)
	go func() { next <- struct{}{} }()
	if b, err := io.ReadAll(resp.Body); err != nil || len(b) != 18 {
		t.Fatalf("second stream: %q %v", b, err)
	}
	resp.Body.Close()
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections, want 1 (the first pooled after its waits)", n)
	}

	ctx, cancel := context.WithCancel(context.Background())
	resp = post(t, c, ctx, srv.URL+"/hang", `{}`)
	defer resp.Body.Close()
	if _, err := io.ReadFull(resp.Body, make([]byte, 18)); err != nil {
		t.Fatal(err)
	}
	cancel()
	wait(resp.Body)
	if _, err := resp.Body.Read(buf); !errors.Is(err, context.Canceled) {
		t.Fatalf("read after a cancelled wait: %v, want context.Canceled", err)
	}
}

package fleet

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/readiness"
)

// rawServer answers every request on every connection with answer(n),
// n counting requests from 0, and counts connections.
type rawServer struct {
	ln    net.Listener
	conns atomic.Int32
	reqs  atomic.Int32
	heard chan string // each request's head, when not nil
}

func newRawServer(t *testing.T, answer func(n int) string) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln, heard: make(chan string, 16)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					var head strings.Builder
					for {
						line, err := br.ReadString('\n')
						if err != nil {
							return
						}
						head.WriteString(line)
						if line == "\r\n" {
							break
						}
					}
					select {
					case s.heard <- head.String():
					default:
					}
					a := answer(int(s.reqs.Add(1) - 1))
					if a == "" {
						return // hang up
					}
					if a == "hang" {
						_, _ = io.Copy(io.Discard, br) // until the client gives up
						return
					}
					if _, err := c.Write([]byte(a)); err != nil {
						return
					}
					if strings.Contains(a, "Connection: close") || !strings.Contains(a, "Content-Length") && !strings.Contains(a, "chunked") {
						return
					}
				}
			}()
		}
	}()
	return s
}

func (s *rawServer) probe(limit int64) *probeConn {
	var d net.Dialer
	return &probeConn{dial: d.DialContext, addr: s.ln.Addr().String(), limit: limit}
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestProbeConnContentLengthKeepsTheConnection(t *testing.T) {
	s := newRawServer(t, func(n int) string {
		return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"n\":1}"
	})
	p := s.probe(1 << 10)
	ctx := ctxFor(t, time.Minute)
	a, err := p.get(ctx, "/health", "", false)
	if err != nil || a.status != 200 || string(a.body) != `{"n":1}` {
		t.Fatalf("first: %+v, %v", a, err)
	}
	a, err = p.get(ctx, "/v1/models", "k3y", true)
	if err != nil || a.status != 200 || string(a.body) != `{"n":1}` {
		t.Fatalf("second: %+v, %v", a, err)
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("%d connections for two requests; want one, kept between them", n)
	}
	if p.conn != nil {
		t.Error("the last request left its connection open")
	}
	<-s.heard
	second := <-s.heard
	for _, want := range []string{"GET /v1/models HTTP/1.1\r\n", "Authorization: Bearer k3y\r\n", "Connection: close\r\n", "Host: " + s.ln.Addr().String() + "\r\n"} {
		if !strings.Contains(second, want) {
			t.Errorf("request %q lacks %q", second, want)
		}
	}
	if p.wbuf != nil && strings.Contains(string(p.wbuf), "k3y") {
		t.Error("the key stayed in the write buffer")
	}
}

func TestProbeConnChunked(t *testing.T) {
	s := newRawServer(t, func(n int) string {
		return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\nX-Trailer: y\r\n\r\n"
	})
	p := s.probe(1 << 10)
	ctx := ctxFor(t, time.Minute)
	for i := range 2 {
		a, err := p.get(ctx, "/health", "", i == 1)
		if err != nil || a.status != 200 || string(a.body) != `{"a":1}` {
			t.Fatalf("request %d: %+v, %v", i, a, err)
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("%d connections; want one", n)
	}
}

func TestProbeConnBodyToTheEnd(t *testing.T) {
	s := newRawServer(t, func(n int) string { return "HTTP/1.0 503 Busy\r\n\r\nbusy" })
	p := s.probe(1 << 10)
	ctx := ctxFor(t, time.Minute)
	for i := range 2 {
		a, err := p.get(ctx, "/health", "", false)
		if err != nil || a.status != 503 || string(a.body) != "busy" {
			t.Fatalf("request %d: %+v, %v", i, a, err)
		}
	}
	if n := s.conns.Load(); n != 2 {
		t.Errorf("%d connections; want a new one after a body read to the end", n)
	}
}

func TestProbeConnCaps(t *testing.T) {
	big := strings.Repeat("x", 100)
	for _, tc := range []struct {
		name, answer string
		want         error
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + big, errProbeTooLarge},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n" + big[:64] + "\r\n40\r\n" + big[:64] + "\r\n0\r\n\r\n", errProbeTooLarge},
		{"to the end", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + big, errProbeTooLarge},
		{"header line", "HTTP/1.1 200 OK\r\nX-Long: " + strings.Repeat("y", probeMaxLine) + "\r\nContent-Length: 0\r\n\r\n", nil},
		{"header count", "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-A: b\r\n", probeMaxHeaders+1) + "Content-Length: 0\r\n\r\n", nil},
		{"status line", "HTTP/2 200\r\n\r\n", nil},
		{"transfer-encoding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", nil},
		{"hang up", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRawServer(t, func(int) string { return tc.answer })
			p := s.probe(64)
			a, err := p.get(ctxFor(t, time.Minute), "/v1/models", "", false)
			if err == nil {
				t.Fatalf("answer %+v accepted", a)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("error %v; want %v", err, tc.want)
			}
			if p.conn != nil {
				t.Error("a failed exchange left its connection open")
			}
		})
	}
}

func TestProbeConnTimeout(t *testing.T) {
	s := newRawServer(t, func(int) string { return "hang" })
	p := s.probe(64)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := p.get(ctx, "/health", "", false)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v; want the context's deadline", err)
	}
	if readiness.Refused(err) {
		t.Error("a timeout reads as a refusal")
	}
	if p.conn != nil {
		t.Error("a timed-out exchange left its connection open")
	}
}

func TestProbeConnCancel(t *testing.T) {
	s := newRawServer(t, func(int) string { return "hang" })
	p := s.probe(64)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for s.reqs.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if _, err := p.get(ctx, "/health", "", false); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v; want canceled", err)
	}
}

func TestProbeConnRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var d net.Dialer
	p := &probeConn{dial: d.DialContext, addr: addr, limit: 64}
	_, err = p.get(ctxFor(t, time.Minute), "/health", "", false)
	if err == nil || !readiness.Refused(err) {
		t.Fatalf("error %v; want a refusal", err)
	}
}

func TestProbeConnInterimAndRealServer(t *testing.T) {
	s := newRawServer(t, func(int) string {
		return "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nno"
	})
	a, err := s.probe(64).get(ctxFor(t, time.Minute), "/x", "", true)
	if err != nil || a.status != 404 || string(a.body) != "no" {
		t.Fatalf("%+v, %v", a, err)
	}
	// net/http's server, keep-alive then close.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		w.Write([]byte(strings.Repeat("z", 5000))) // chunked: over the server's buffer
	}))
	defer srv.Close()
	var d net.Dialer
	p := &probeConn{dial: d.DialContext, addr: strings.TrimPrefix(srv.URL, "http://"), limit: 1 << 20}
	ctx := ctxFor(t, time.Minute)
	if a, err := p.get(ctx, "/a", "", false); err != nil || a.status != 200 || len(a.body) != 5000 {
		t.Fatalf("first: %d %d, %v", a.status, len(a.body), err)
	}
	if a, err := p.get(ctx, "/moved", "", true); err != nil || a.status != 302 || !a.location {
		t.Fatalf("redirect: %+v, %v", a, err)
	}
}

package fleet

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/readiness"
	"github.com/rolter/rolter/internal/store/storetest"
)

// The probes of a controller that closes its connections (an interval over
// readiness.ProbeIdleTimeout) with Dial set go through its own h1client
// transport. These tests drive that path (Controller.get) against a raw
// server; h1client's own tests cover the response parsing.

// rawServer answers every request on every connection with answer(n),
// n counting requests from 0, and counts connections opened and closed by
// the client.
type rawServer struct {
	ln     net.Listener
	conns  atomic.Int32
	hungUp atomic.Int32 // connections the client closed
	reqs   atomic.Int32
	heard  chan string // each request's head
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
							s.hungUp.Add(1)
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
					if a == "hang" {
						_, _ = io.Copy(io.Discard, br) // until the client gives up
						s.hungUp.Add(1)
						return
					}
					if _, err := c.Write([]byte(a)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return s
}

func (s *rawServer) base() string { return "http://" + s.ln.Addr().String() }

// probeController is a controller whose probes close their connections,
// dialing with a plain dialer.
func probeController(t *testing.T) *Controller {
	t.Helper()
	var d net.Dialer
	c := NewController(storetest.Open(t, "sqlite", nil), ControllerConfig{Interval: 10 * time.Second, Dial: d.DialContext},
		slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if c.probes == nil {
		t.Fatal("no h1client probe client at a 10 s interval with Dial set")
	}
	return c
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitFor waits, with a generous deadline, until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// /health and /v1/models share one connection; the last request asks to
// close it and it is closed, even when the server would keep it.
func TestProbeOneConnectionClosedAfterLast(t *testing.T) {
	s := newRawServer(t, func(n int) string {
		return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"n\":1}"
	})
	c := probeController(t)
	ctx := ctxFor(t, time.Minute)
	if b, _, err := c.get(ctx, s.base(), "/health", "", false); err != nil || string(b) != `{"n":1}` {
		t.Fatalf("first: %q, %v", b, err)
	}
	if b, _, err := c.get(ctx, s.base(), "/v1/models", "k3y", true); err != nil || string(b) != `{"n":1}` {
		t.Fatalf("second: %q, %v", b, err)
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("%d connections for two requests; want one, kept between them", n)
	}
	waitFor(t, "the client to close the connection", func() bool { return s.hungUp.Load() == 1 })
	first, second := <-s.heard, <-s.heard
	if strings.Contains(first, "Connection: close") || strings.Contains(first, "Authorization") {
		t.Errorf("first request %q asks to close or carries a key", first)
	}
	for _, want := range []string{"GET /v1/models HTTP/1.1\r\n", "Authorization: Bearer k3y\r\n", "Connection: close\r\n",
		"Host: " + s.ln.Addr().String() + "\r\n", "User-Agent: rolter-probe\r\n"} {
		if !strings.Contains(second, want) {
			t.Errorf("request %q lacks %q", second, want)
		}
	}
}

func TestProbeBodyCap(t *testing.T) {
	big := strings.Repeat("x", probeBodyLimit+1)
	for _, tc := range []struct{ name, answer string }{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: " + itoa(len(big)) + "\r\n\r\n" + big},
		{"to the end", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + big},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRawServer(t, func(int) string { return tc.answer })
			b, _, err := probeController(t).get(ctxFor(t, time.Minute), s.base(), "/v1/models", "", false)
			if !errors.Is(err, errProbeTooLarge) {
				t.Fatalf("%d bytes, error %v; want %v", len(b), err, errProbeTooLarge)
			}
			waitFor(t, "the connection to be closed", func() bool { return s.hungUp.Load() == 1 })
		})
	}
	// At the cap exactly, the body is read.
	s := newRawServer(t, func(int) string {
		return "HTTP/1.1 200 OK\r\nContent-Length: " + itoa(probeBodyLimit) + "\r\n\r\n" + big[:probeBodyLimit]
	})
	if b, _, err := probeController(t).get(ctxFor(t, time.Minute), s.base(), "/v1/models", "", true); err != nil || len(b) != probeBodyLimit {
		t.Fatalf("at the cap: %d bytes, %v", len(b), err)
	}
}

func TestProbeTimeout(t *testing.T) {
	s := newRawServer(t, func(int) string { return "hang" })
	c := probeController(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, _, err := c.get(ctx, s.base(), "/health", "", false)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v; want the context's deadline", err)
	}
	if readiness.Refused(err) {
		t.Error("a timeout reads as a refusal")
	}
	waitFor(t, "the timed-out connection to be closed", func() bool { return s.hungUp.Load() == s.conns.Load() }) // none when the deadline came before the dial
}

func TestProbeCancel(t *testing.T) {
	s := newRawServer(t, func(int) string { return "hang" })
	c := probeController(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for s.reqs.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if _, _, err := c.get(ctx, s.base(), "/health", "", false); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v; want canceled", err)
	}
}

func TestProbeRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, _, err = probeController(t).get(ctxFor(t, time.Minute), "http://"+addr, "/health", "", false)
	if err == nil || !readiness.Refused(err) {
		t.Fatalf("error %v; want a refusal", err)
	}
}

func TestProbeRedirectRefused(t *testing.T) {
	s := newRawServer(t, func(int) string {
		return "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/elsewhere\r\nContent-Length: 0\r\n\r\n"
	})
	_, _, err := probeController(t).get(ctxFor(t, time.Minute), s.base(), "/v1/models", "k3y", true)
	if !errors.Is(err, errRedirect) {
		t.Fatalf("error %v; want %v", err, errRedirect)
	}
	if n := s.reqs.Load(); n != 1 {
		t.Errorf("%d requests; the redirect was followed", n)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

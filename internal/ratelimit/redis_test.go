package ratelimit

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rolter/rolter/internal/clock"
	"github.com/rolter/rolter/internal/testkit"
)

type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *logBuf) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func newRedis(t *testing.T, url, prefix string, reg prometheus.Registerer, logs io.Writer) *Redis {
	t.Helper()
	if logs == nil {
		logs = io.Discard
	}
	c, err := NewClient(url, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return NewRedis(context.Background(), RedisConfig{Client: c, Prefix: prefix, ProbeEvery: 20 * time.Millisecond, Registry: reg},
		NewLocal(clock.System, 0), slog.New(slog.NewTextHandler(logs, nil)))
}

// TestRedisSharesLimits: two limiters on one Redis share every limit, take
// all or nothing, and correct token estimates.
func TestRedisSharesLimits(t *testing.T) {
	addr := testkit.RedisAddr(t)
	prefix := testkit.RedisPrefix(t, addr)
	a := newRedis(t, "redis://"+addr, prefix, nil, nil)
	b := newRedis(t, "redis://"+addr, prefix, nil, nil)
	ctx := context.Background()
	key := rpm(1, 5)
	project := Limit{Scope: ScopeProject, ID: 1, Unit: Requests, PerMinute: 3, Cost: 1}
	admitted := 0
	for i := range 10 {
		l := a
		if i%2 == 1 {
			l = b
		}
		r := l.Take(ctx, []Limit{key, project})
		if !r.Shared {
			t.Fatalf("take %d answered locally", i)
		}
		if r.Allowed {
			admitted++
			continue
		}
		if r.Denied != 1 || r.RetryAfter <= 0 || r.RetryAfter > time.Minute || r.States[1].Remaining != 0 {
			t.Fatalf("refusal %d = %+v", i, r)
		}
	}
	if admitted != 3 {
		t.Fatalf("admitted %d, want 3 (the project's limit)", admitted)
	}
	// The project's refusals took nothing from the key: 2 left.
	r := a.Take(ctx, []Limit{key})
	if !r.Allowed || r.States[0].Remaining != 1 {
		t.Fatalf("key after refusals = %+v", r)
	}

	tok := Limit{Scope: ScopeKey, ID: 1, Unit: Tokens, PerMinute: 1000, Cost: 900}
	if r := a.Take(ctx, []Limit{tok}); !r.Allowed || r.States[0].Remaining != 100 {
		t.Fatalf("token take = %+v", r)
	}
	if r := b.Take(ctx, []Limit{{Scope: ScopeKey, ID: 1, Unit: Tokens, PerMinute: 1000, Cost: 200}}); r.Allowed {
		t.Fatalf("over the token limit on the other replica = %+v", r)
	}
	b.Adjust(ctx, []Limit{{Scope: ScopeKey, ID: 1, Unit: Tokens, PerMinute: 1000, Cost: -800}}, true)
	if r := a.Take(ctx, []Limit{{Scope: ScopeKey, ID: 1, Unit: Tokens, PerMinute: 1000, Cost: 800}}); !r.Allowed {
		t.Fatalf("after the correction = %+v", r)
	}
	if r := a.Take(ctx, []Limit{{Scope: ScopeKey, ID: 2, Unit: Tokens, PerMinute: 1000, Cost: 1001}}); r.Allowed || !r.TooLarge {
		t.Fatalf("too large = %+v", r)
	}
	if a.Down() || b.Down() {
		t.Fatal("a limiter fell back with Redis up")
	}
}

// proxy is a TCP proxy to Redis that the test can stop, slow down and
// restart on the same address.
type proxy struct {
	t      *testing.T
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
	delay  time.Duration
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: target}
	p.start("127.0.0.1:0")
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) start(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() {
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						p.mu.Lock()
						delay := p.delay
						p.mu.Unlock()
						time.Sleep(delay) // the slow Redis under test, not synchronisation
						if _, werr := up.Write(buf[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				up.Close()
			}()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

func (p *proxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestRedisOutageFallsBack: when Redis goes away mid-run, checks are
// answered locally at once, the outage is logged once and shown in the
// metrics, and the limiter returns to Redis when it is back.
func TestRedisOutageFallsBack(t *testing.T) {
	addr := testkit.RedisAddr(t)
	prefix := testkit.RedisPrefix(t, addr)
	p := newProxy(t, addr)
	reg := prometheus.NewRegistry()
	logs := &logBuf{}
	r := newRedis(t, "redis://"+p.addr, prefix, reg, logs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	lim := []Limit{rpm(1, 1_000_000)}
	if res := r.Take(ctx, lim); !res.Allowed || !res.Shared {
		t.Fatalf("before the outage = %+v", res)
	}
	p.stop()
	var slowest time.Duration
	for i := range 200 {
		start := time.Now()
		res := r.Take(ctx, lim)
		slowest = max(slowest, time.Since(start))
		if !res.Allowed {
			t.Fatalf("check %d during the outage refused: %+v", i, res)
		}
		if i > 0 && res.Shared {
			t.Fatalf("check %d during the outage answered by Redis", i)
		}
	}
	t.Logf("slowest check during the outage: %v", slowest)
	if slowest > 2*time.Second {
		t.Fatalf("a check stalled %v during the outage", slowest)
	}
	if g := testutil.ToFloat64(r.gauge); g != 1 {
		t.Fatalf("fallback gauge = %v", g)
	}
	if n := testutil.ToFloat64(r.fallbacks); n < 199 {
		t.Fatalf("fallback checks = %v", n)
	}
	if n := strings.Count(logs.String(), "Redis is unavailable"); n != 1 {
		t.Fatalf("outage logged %d times:\n%s", n, logs.String())
	}

	p.start(p.addr) // Redis is reachable again on the same address
	deadline := time.Now().Add(30 * time.Second)
	for r.Down() {
		if time.Now().After(deadline) {
			t.Fatal("the limiter never returned to Redis")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if res := r.Take(ctx, lim); !res.Allowed || !res.Shared {
		t.Fatalf("after the outage = %+v", res)
	}
	if g := testutil.ToFloat64(r.gauge); g != 0 {
		t.Fatalf("fallback gauge after = %v", g)
	}
	if !strings.Contains(logs.String(), "Redis is back") {
		t.Fatalf("recovery not logged:\n%s", logs.String())
	}
}

// TestRedisSlowFallsBack: a Redis that answers after the 50ms timeout
// counts as an outage; checks do not wait for it.
func TestRedisSlowFallsBack(t *testing.T) {
	addr := testkit.RedisAddr(t)
	prefix := testkit.RedisPrefix(t, addr)
	p := newProxy(t, addr)
	r := newRedis(t, "redis://"+p.addr, prefix, nil, nil)
	ctx := context.Background()
	if res := r.Take(ctx, []Limit{rpm(1, 1000)}); !res.Allowed || !res.Shared {
		t.Fatalf("before the slowdown: %+v", res)
	}
	p.mu.Lock()
	p.delay = 300 * time.Millisecond
	p.mu.Unlock()
	var slowest time.Duration
	for i := range 50 {
		start := time.Now()
		if res := r.Take(ctx, []Limit{rpm(1, 1000)}); !res.Allowed || res.Shared {
			t.Fatalf("check %d with a slow Redis: %+v", i, res)
		}
		slowest = max(slowest, time.Since(start))
	}
	t.Logf("slowest check with a slow Redis: %v", slowest)
	if !r.Down() {
		t.Fatal("a slow Redis is not treated as down")
	}
}

func TestRedisBadURL(t *testing.T) {
	_, err := NewClient("http://user:hunter2@x", 0)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("err = %v", err)
	}
}

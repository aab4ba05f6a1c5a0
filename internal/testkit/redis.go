package testkit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisAddr is the test Redis: 127.0.0.1:6379, or ROLTER_TEST_REDIS. A
// test without one is skipped and says so, except under CI=true, where a
// missing Redis is a failure.
func RedisAddr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv("ROLTER_TEST_REDIS")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Redis at %s: %v", addr, err)
		}
		t.Skipf("no Redis at %s: %v", addr, err)
	}
	_ = c.Close()
	return addr
}

// RedisPrefix is a key prefix no other run uses; the keys under it are
// deleted when the test ends, and nothing else is touched.
func RedisPrefix(t testing.TB, addr string) string {
	t.Helper()
	p := fmt.Sprintf("rolter-test:%d-%d:", time.Now().UnixNano(), rand.Uint32())
	t.Cleanup(func() {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer func() { _ = c.Close() }()
		ctx := context.Background()
		iter := c.Scan(ctx, 0, p+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	})
	return p
}

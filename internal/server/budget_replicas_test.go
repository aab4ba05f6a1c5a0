package server_test

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/server"
	"github.com/rolter/rolter/internal/store/storetest"
	"github.com/rolter/rolter/internal/testkit"
)

// Each request to route "paid" costs 1,000 prompt tokens at $1/M plus 500
// completion tokens at $2/M: $0.002, 2,000,000 nano-USD.
const (
	requestCost     = 0.002
	requestCostNano = 2_000_000
)

// setupPaid creates provider "paid" (priced) on upstream and route "paid"
// to it, and a key "alice" with a budget of amount dollars a day; it
// returns the key.
func (e *limitsEnv) setupPaid(upstream, amount string) string {
	e.t.Helper()
	e.admin(201, "POST", "/orgs/default/providers", `{"name":"paid","kind":"vllm","base_url":"`+upstream+`/v1","prices":{"input":1,"output":2}}`)
	e.admin(201, "POST", "/orgs/default/projects/default/routes", `{"model":"paid","targets":[{"provider":"paid"}]}`)
	m := e.admin(201, "POST", "/orgs/default/projects/default/keys", `{"name":"alice","budget":{"amount":`+amount+`,"period":"day"}}`)
	return m["secret"].(string)
}

// refused asserts that a is the refusal of alice's spent daily budget.
func refused(t *testing.T, who string, a answer) {
	t.Helper()
	if a.status != 429 {
		t.Fatalf("%s: %d %s, want 429 budget_exceeded", who, a.status, a.body)
	}
	now := time.Now().UTC()
	checkRefusal(t, &http.Response{Header: a.h}, a.body, `key "alice"`, time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC))
}

// spendKey is the one Redis spend counter of key scopes under prefix,
// and its value ("" when there is none).
func spendKey(t *testing.T, rdb *redis.Client, prefix string) (string, string) {
	t.Helper()
	ctx := context.Background()
	keys, _, err := rdb.Scan(ctx, 0, prefix+"spend:key:*", 1000).Result()
	if err != nil || len(keys) > 1 {
		t.Fatalf("spend counters under %s: %v %v", prefix, keys, err)
	}
	if len(keys) == 0 {
		return "", ""
	}
	v, _ := rdb.Get(ctx, keys[0]).Result()
	return keys[0], v
}

// waitSpendKey waits until the Redis spend counter holds want.
func waitSpendKey(t *testing.T, rdb *redis.Client, prefix, want string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		k, v := spendKey(t, rdb, prefix)
		if v == want {
			return k
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis spend counter %q = %q after 30s, want %s", k, v, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitStoredCost waits until the usage table (the durable record) holds
// alice's cost of want dollars: every replica has flushed its usage.
func (e *limitsEnv) waitStoredCost(want float64) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := e.admin(200, "GET", "/orgs/default/usage/summary?key=alice", "")
		var cost float64
		if rows, _ := m["data"].([]any); len(rows) == 1 {
			cost, _ = rows[0].(map[string]any)["cost"].(float64)
		}
		if math.Abs(cost-want) < 1e-9 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("stored cost of alice %v after 30s, want %v", m, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBudgetThreeReplicas: three gateway processes on one PostgreSQL share
// a key's budget through one Redis counter. Requests from 6 concurrent
// clients spread over the replicas are served until the budget is spent,
// then every replica refuses; a replica started afterwards refuses too,
// and so do they all when Redis has lost the counter (it is seeded again
// from the usage table).
//
// The overshoot bound: a request's cost is charged when it ends, after its
// response is written, so what can be served beyond the budget is what was
// admitted but not yet charged when the budget ran out. Each client has
// one request in flight, and its previous one may still be charging (the
// client has its response, the gateway has not yet added the cost): with
// W clients, at most 2W-1 requests beyond the budget. Without sharing,
// each replica would serve about a whole budget before its store counter
// saw the others' spend (about 3 budgets in all, far above the bound).
func TestBudgetThreeReplicas(t *testing.T) {
	addr := testkit.RedisAddr(t)
	prefix := testkit.RedisPrefix(t, addr)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	spec, _ := storetest.Spec(t, "postgres")
	up := tokenUpstream(t)
	// As in TestRateLimitThreeReplicas, the Redis timeout is 2s: a loaded
	// test machine may not run a replica within the 50ms default, and
	// this test measures sharing, not the fallback.
	rc := func() replicaConfig {
		return replicaConfig{Store: spec, DataDir: t.TempDir(), Redis: "redis://" + addr, RedisPrefix: prefix, RedisTimeout: 2 * time.Second}
	}
	var gws []*limitsEnv
	for range 3 {
		gws = append(gws, startReplica(t, rc()))
	}
	const budgetRequests, clients = 10, 6
	key := gws[0].setupPaid(up.URL, "0.02") // 10 requests
	for _, g := range gws {
		g.waitKnows(key)
	}

	var mu sync.Mutex
	served := make([]int, len(gws))
	var wg sync.WaitGroup
	begin := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; ; i++ {
				g := gws[i%len(gws)]
				a := g.send("/v1/chat/completions", key, chat("paid"))
				if a.status == 429 && strings.Contains(a.body, `"budget_exceeded"`) {
					return
				}
				if a.status != 200 {
					t.Errorf("client %d on %s: %d %s", c, g.addr, a.status, a.body)
					return
				}
				mu.Lock()
				served[i%len(gws)]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	total := served[0] + served[1] + served[2]
	t.Logf("%d clients over 3 replicas: %d requests served (per replica %v) in %v; the budget covers %d: overshoot %d (bound %d)",
		clients, total, served, time.Since(begin).Round(time.Millisecond), budgetRequests, total-budgetRequests, 2*clients-1)
	if total < budgetRequests || total > budgetRequests+2*clients-1 {
		t.Fatalf("%d requests served; the budget covers %d, plus at most %d in flight", total, budgetRequests, 2*clients-1)
	}

	// The spend is one counter in Redis, with every replica's costs.
	want := strconv.Itoa(total * requestCostNano)
	k := waitSpendKey(t, rdb, prefix, want)
	t.Logf("Redis counter %s = %s nano-USD", strings.TrimPrefix(k, prefix), want)
	for _, g := range gws {
		refused(t, g.addr, g.send("/v1/chat/completions", key, chat("paid")))
	}

	// A replica started later refuses at once.
	gws[0].waitStoredCost(float64(total) * requestCost)
	late := startReplica(t, rc())
	refused(t, "a 4th replica", late.send("/v1/chat/completions", key, chat("paid")))
	// Redis lost the counter: it is seeded from the usage table, not zero.
	rdb.Del(context.Background(), k)
	refused(t, "after Redis lost the counter", late.send("/v1/chat/completions", key, chat("paid")))
	if _, v := spendKey(t, rdb, prefix); v != want {
		t.Fatalf("counter seeded again = %q, want %s", v, want)
	}
}

// TestBudgetRedisOutage: when Redis stops answering, budgets are checked
// against the store-backed counter, the outage is logged once, and no
// request waits for Redis longer than the Redis timeout (one request a
// second waits that long, to find whether Redis is back).
func TestBudgetRedisOutage(t *testing.T) {
	addr := testkit.RedisAddr(t)
	prefix := testkit.RedisPrefix(t, addr)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	p := newCutProxy(t, addr)
	spec, dir := storetest.Spec(t, "sqlite")
	// 200ms rather than the 50ms default, so that a loaded test machine
	// does not time Redis out before the outage.
	const timeout = 200 * time.Millisecond
	e := startLimits(t, server.Config{Store: spec, DataDir: dir, AdminToken: secret.New(limitsAdmin),
		Redis: "redis://" + p.ln.Addr().String(), RedisPrefix: prefix, RedisTimeout: timeout}, "", false)
	key := e.setupPaid(tokenUpstream(t).URL, "0.02") // 10 requests
	for i := range 4 {
		if a := e.send("/v1/chat/completions", key, chat("paid")); a.status != 200 {
			t.Fatalf("request %d before the outage: %d %s", i, a.status, a.body)
		}
	}
	waitSpendKey(t, rdb, prefix, strconv.Itoa(4*requestCostNano))
	e.waitStoredCost(4 * requestCost)

	p.stall()
	var slowest time.Duration
	servedDuring, waited := 0, 0
	for {
		begin := time.Now()
		a := e.send("/v1/chat/completions", key, chat("paid"))
		took := time.Since(begin)
		slowest = max(slowest, took)
		if took >= timeout {
			waited++
		}
		if a.status == 429 {
			refused(t, "during the outage", a)
			break
		}
		if a.status != 200 || servedDuring > 20 {
			t.Fatalf("during the outage, after %d served: %d %s", servedDuring, a.status, a.body)
		}
		servedDuring++
	}
	t.Logf("Redis stalled: %d more requests served, then refused; slowest request %v, %d of %d took the Redis timeout (%v) or more",
		servedDuring, slowest.Round(time.Millisecond), waited, servedDuring+1, timeout)
	// The budget covers 6 more; one more may pass while the previous
	// request's cost is being charged.
	if servedDuring < 6 || servedDuring > 7 {
		t.Fatalf("%d requests served during the outage; the budget had 6 left", servedDuring)
	}
	if slowest > timeout+2*time.Second {
		t.Fatalf("a request took %v with Redis stalled", slowest)
	}
	if n := strings.Count(e.logs.String(), "budget counter unavailable"); n != 1 {
		t.Fatalf("outage logged %d times", n)
	}
}

package spend_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rolter/rolter/internal/money"
	"github.com/rolter/rolter/internal/spend"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/sqlstore"
	"github.com/rolter/rolter/internal/store/storetest"
	"github.com/rolter/rolter/internal/testkit"
)

func TestPeriod(t *testing.T) {
	at := time.Date(2025, 3, 13, 15, 4, 5, 0, time.FixedZone("X", -8*3600)) // Thu 23:04:05 UTC
	for _, c := range []struct {
		kind       string
		start, end string
	}{
		{"day", "2025-03-13T00:00:00Z", "2025-03-14T00:00:00Z"},
		{"week", "2025-03-10T00:00:00Z", "2025-03-17T00:00:00Z"}, // Monday to Monday
		{"month", "2025-03-01T00:00:00Z", "2025-04-01T00:00:00Z"},
	} {
		s, e := spend.Period(c.kind, at)
		if s.Format(time.RFC3339) != c.start || e.Format(time.RFC3339) != c.end {
			t.Errorf("%s: %s..%s, want %s..%s", c.kind, s.Format(time.RFC3339), e.Format(time.RFC3339), c.start, c.end)
		}
	}
	// A Sunday belongs to the week that started the Monday before.
	if s, _ := spend.Period("week", time.Date(2025, 3, 16, 23, 0, 0, 0, time.UTC)); s.Day() != 10 {
		t.Errorf("Sunday's week starts on the %d", s.Day())
	}
}

// fixture is a store with a key and its usage.
type fixture struct {
	db    *sqlstore.DB
	key   spend.Scope
	proj  spend.Scope
	start time.Time
	end   time.Time
}

func newFixture(t *testing.T, dialect string) *fixture {
	t.Helper()
	ctx := context.Background()
	db := storetest.Open(t, dialect, nil)
	o := &store.Org{Name: "o"}
	if err := db.CreateOrg(ctx, o); err != nil {
		t.Fatal(err)
	}
	p := &store.Project{OrgID: o.ID, Name: "p"}
	if err := db.CreateProject(ctx, p); err != nil {
		t.Fatal(err)
	}
	start, end := spend.Period("day", time.Now())
	return &fixture{db: db, key: spend.Scope{Kind: spend.KindKey, ID: 42}, proj: spend.Scope{Kind: spend.KindProject, ID: p.ID}, start: start, end: end}
}

// spent writes a usage record of key 42 with cost at.
func (f *fixture) spent(t *testing.T, cost money.Amount, at time.Time) {
	t.Helper()
	if err := f.db.InsertUsage(context.Background(), []store.UsageRecord{{CreatedAt: at, OrgID: 1, ProjectID: f.proj.ID, KeyID: 42,
		AddressKind: "route", Address: "m", Status: 200, Cost: &cost}}); err != nil {
		t.Fatal(err)
	}
}

func TestStoreCounter(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		f := newFixture(t, dialect)
		f.spent(t, 700, f.start.Add(-time.Second)) // the period before: not counted
		f.spent(t, 300, f.start)
		c := spend.NewStoreCounter(f.db, time.Hour, nil)
		for _, sc := range []spend.Scope{f.key, f.proj} {
			if v, err := c.Spent(ctx, sc, f.start, f.end); err != nil || v != 300 {
				t.Fatalf("%s first read = %d, %v; want 300", sc, v, err)
			}
		}
		// This replica's costs count at once, before they reach the store.
		_ = c.Add(ctx, f.key, f.start, f.end, 50)
		if v, _ := c.Spent(ctx, f.key, f.start, f.end); v != 350 {
			t.Fatalf("after Add = %d, want 350", v)
		}
		// Once the record is flushed, a refresh does not count it twice.
		f.spent(t, 50, f.start.Add(time.Minute))
		c.Refresh(ctx)
		if v, _ := c.Spent(ctx, f.key, f.start, f.end); v != 350 {
			t.Fatalf("after the flush and a refresh = %d, want 350", v)
		}
		// Another replica's spend shows after a refresh.
		f.spent(t, 1000, f.start.Add(2*time.Minute))
		c.Refresh(ctx)
		if v, _ := c.Spent(ctx, f.key, f.start, f.end); v != 1350 {
			t.Fatalf("after another replica's spend = %d, want 1350", v)
		}
		// A new counter (a restart) reads the durable total.
		c2 := spend.NewStoreCounter(f.db, time.Hour, nil)
		if v, _ := c2.Spent(ctx, f.key, f.start, f.end); v != 1350 {
			t.Fatalf("after a restart = %d, want 1350", v)
		}
	})
}

// TestStoreCounterConcurrent: many first callers share one store read and
// every Add counts (run with -race).
func TestStoreCounterConcurrent(t *testing.T) {
	f := newFixture(t, "sqlite")
	ctx := context.Background()
	c := spend.NewStoreCounter(f.db, time.Hour, nil)
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Spent(ctx, f.key, f.start, f.end); err != nil {
				t.Error(err)
			}
			_ = c.Add(ctx, f.key, f.start, f.end, 1)
			c.Refresh(ctx)
		}()
	}
	wg.Wait()
	if v, _ := c.Spent(ctx, f.key, f.start, f.end); v != 50 {
		t.Fatalf("spent = %d, want 50", v)
	}
}

type failing struct{ calls *atomic.Int64 }

func (f failing) Spent(context.Context, spend.Scope, time.Time, time.Time) (money.Amount, error) {
	if f.calls != nil {
		f.calls.Add(1)
	}
	return 0, errors.New("down")
}
func (f failing) Add(context.Context, spend.Scope, time.Time, time.Time, money.Amount) error {
	if f.calls != nil {
		f.calls.Add(1)
	}
	return errors.New("down")
}

func TestTracker(t *testing.T) {
	f := newFixture(t, "sqlite")
	ctx := context.Background()
	now := time.Date(2025, 3, 13, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	c := spend.NewStoreCounter(f.db, time.Hour, clock)
	tr := spend.NewTracker(c, nil, nil, clock)
	limits := []spend.Limit{
		{Scope: f.key, Name: "alice", Budget: store.Budget{Amount: 1000, Period: "day"}},
		{Scope: f.proj, Name: "web", Budget: store.Budget{Amount: 5000, Period: "month"}},
	}
	if ex := tr.Check(ctx, limits); ex != nil {
		t.Fatalf("fresh budgets refused: %v", ex)
	}
	tr.Add(ctx, limits, 1000)
	ex := tr.Check(ctx, limits)
	if ex == nil || ex.Scope != f.key || ex.Spent != 1000 || !ex.Reset.Equal(time.Date(2025, 3, 14, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("after spending the key's budget: %+v", ex)
	}
	if msg := ex.Error(); !strings.Contains(msg, `key "alice"`) || !strings.Contains(msg, "2025-03-14T00:00:00Z") {
		t.Fatalf("message %q names neither the key nor the reset", msg)
	}
	// The next day the key's budget is fresh; the project's month is not.
	now = now.Add(24 * time.Hour)
	tr.Add(ctx, limits[1:], 4000)
	ex = tr.Check(ctx, limits)
	if ex == nil || ex.Scope != f.proj || ex.Spent != 5000 || ex.Reset.Format(time.RFC3339) != "2025-04-01T00:00:00Z" {
		t.Fatalf("project: %+v", ex)
	}
	// A failing counter with no fallback lets requests through and counts.
	tf := spend.NewTracker(failing{}, nil, nil, clock)
	if ex := tf.Check(ctx, limits); ex != nil || tf.Errors() == 0 {
		t.Fatalf("failing counter: %v, %d errors", ex, tf.Errors())
	}
	// With a fallback, the fallback answers, and the outage is logged
	// once however many checks it answers. The failed counter is not
	// asked again (a slow one would cost every request its timeout)
	// until a second has passed, and then by one check.
	var logs strings.Builder
	var calls atomic.Int64
	tb := spend.NewTracker(failing{&calls}, c, slog.New(slog.NewTextHandler(&logs, nil)), clock)
	for i := range 6 {
		if i == 3 {
			now = now.Add(time.Second)
		}
		if ex := tb.Check(ctx, limits); ex == nil || ex.Scope != f.proj {
			t.Fatalf("fallback: %+v", ex)
		}
		tb.Add(ctx, limits, 1)
	}
	if n := strings.Count(logs.String(), "budget counter unavailable"); n != 1 || strings.Contains(logs.String(), "answers again") {
		t.Fatalf("an outage answered by the fallback logged %d times:\n%s", n, logs.String())
	}
	if calls.Load() != 2 {
		t.Fatalf("the failed counter was asked %d times in 6 checks over a second, want 2", calls.Load())
	}
}

func redisClient(t *testing.T) (*redis.Client, string) {
	t.Helper()
	addr := testkit.RedisAddr(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb, testkit.RedisPrefix(t, addr)
}

func TestRedisCounter(t *testing.T) {
	rdb, prefix := redisClient(t)
	ctx := context.Background()
	f := newFixture(t, "sqlite")
	f.spent(t, 300, f.start)
	a := spend.NewRedisCounter(rdb, f.db, prefix, time.Second)
	b := spend.NewRedisCounter(rdb, f.db, prefix, time.Second) // another replica

	// Seeded from the store on first use.
	if v, err := a.Spent(ctx, f.key, f.start, f.end); err != nil || v != 300 {
		t.Fatalf("seeded = %d, %v; want 300", v, err)
	}
	// Replicas see each other's costs at once.
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := a
			if i%2 == 1 {
				c = b
			}
			if err := c.Add(ctx, f.key, f.start, f.end, 7); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if v, _ := b.Spent(ctx, f.key, f.start, f.end); v != 1000 {
		t.Fatalf("after 100 adds of 7 on two replicas = %d, want 1000", v)
	}
	// The counter expires a day after its period.
	key := prefix + "spend:key:42:" + strconv.FormatInt(f.start.Unix(), 10)
	if ttl := rdb.TTL(ctx, key).Val(); ttl <= 0 || ttl > time.Until(f.end.Add(24*time.Hour))+time.Minute {
		t.Fatalf("ttl = %v", ttl)
	}
	// A Redis that lost the counter seeds again from the store on Add, then
	// adds: the durable record, not zero.
	rdb.Del(ctx, key)
	if err := b.Add(ctx, f.key, f.start, f.end, 5); err != nil {
		t.Fatal(err)
	}
	if v, _ := a.Spent(ctx, f.key, f.start, f.end); v != 305 {
		t.Fatalf("after the counter was lost = %d, want 305", v)
	}
	// Replicas racing to seed a new counter: the first seeds it, the others
	// use it (SET NX answering nil is not a failure), and no cost is lost.
	fresh, other := spend.Scope{Kind: spend.KindKey, ID: 99}, spend.Scope{Kind: spend.KindKey, ID: 98}
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := a
			if i%2 == 1 {
				c = b
			}
			if err := c.Add(ctx, fresh, f.start, f.end, 3); err != nil {
				t.Errorf("concurrent first Add: %v", err)
			}
			if _, err := c.Spent(ctx, other, f.start, f.end); err != nil {
				t.Errorf("concurrent first Spent: %v", err)
			}
		}()
	}
	wg.Wait()
	if v, err := a.Spent(ctx, fresh, f.start, f.end); err != nil || v != 120 {
		t.Fatalf("after 40 concurrent first adds of 3 = %d, %v; want 120", v, err)
	}
	// An unreachable Redis is an error, promptly, not a stall.
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer dead.Close()
	d := spend.NewRedisCounter(dead, f.db, prefix, 50*time.Millisecond)
	begin := time.Now()
	if _, err := d.Spent(ctx, f.key, f.start, f.end); err == nil {
		t.Fatal("a dead Redis answered")
	}
	t.Logf("dead Redis answered an error in %v", time.Since(begin))
}

package spend

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rolter/rolter/internal/money"
)

// RedisCounter is a Counter shared by every replica through Redis: one
// integer of nano-USD per scope and period, under
// "<prefix>spend:<kind>:<id>:<period start Unix>", expiring a day after the
// period ends.
//
// A missing counter (first use, a flushed or restarted Redis) is seeded
// from the usage table with SET NX, so a Redis that lost its data falls
// back to the durable record rather than to zero. Add increments only an
// existing counter (one Lua script, atomic), seeding it first otherwise.
type RedisCounter struct {
	rdb     redis.UniversalClient
	st      Summer
	prefix  string
	timeout time.Duration
}

// NewRedisCounter returns a counter on rdb under prefix (e.g. "rolter:"),
// seeding from st. timeout bounds each call (default 50ms), so a slow
// Redis costs a request at most that before the Tracker's fallback answers.
func NewRedisCounter(rdb redis.UniversalClient, st Summer, prefix string, timeout time.Duration) *RedisCounter {
	if timeout <= 0 {
		timeout = 50 * time.Millisecond
	}
	return &RedisCounter{rdb: rdb, st: st, prefix: prefix, timeout: timeout}
}

func (c *RedisCounter) key(s Scope, start time.Time) string {
	return c.prefix + "spend:" + s.Kind + ":" + strconv.FormatInt(s.ID, 10) + ":" + strconv.FormatInt(start.Unix(), 10)
}

// incrExisting adds ARGV[1] to KEYS[1] if it exists; it answers false
// (nil) when the counter must be seeded first.
var incrExisting = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.call('INCRBY', KEYS[1], ARGV[1])
end
return false`)

// seedTimeout bounds a seed: one store read per scope and period.
const seedTimeout = 5 * time.Second

// Spent implements Counter.
func (c *RedisCounter) Spent(ctx context.Context, s Scope, start, end time.Time) (money.Amount, error) {
	k := c.key(s, start)
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	v, err := c.rdb.Get(rctx, k).Int64()
	cancel()
	if errors.Is(err, redis.Nil) {
		sctx, cancel := context.WithTimeout(ctx, seedTimeout)
		defer cancel()
		if err := c.seed(sctx, k, s, start, end); err != nil {
			return 0, err
		}
		v, err = c.rdb.Get(sctx, k).Int64()
	}
	return money.Amount(v), err
}

// Add implements Counter.
func (c *RedisCounter) Add(ctx context.Context, s Scope, start, end time.Time, cost money.Amount) error {
	k := c.key(s, start)
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	err := incrExisting.Run(rctx, c.rdb, []string{k}, int64(cost)).Err()
	cancel()
	if !errors.Is(err, redis.Nil) {
		return err
	}
	ctx, cancel = context.WithTimeout(ctx, seedTimeout)
	defer cancel()
	// Seeded from the store, which does not have this request's record
	// yet (usage is written in batches), then incremented.
	if err := c.seed(ctx, k, s, start, end); err != nil {
		return err
	}
	return c.rdb.IncrBy(ctx, k, int64(cost)).Err()
}

// seed sets a missing counter to the store's sum; a replica that seeded
// first wins.
func (c *RedisCounter) seed(ctx context.Context, k string, s Scope, start, end time.Time) error {
	v, err := spentSince(ctx, c.st, s, start)
	if err != nil {
		return err
	}
	err = c.rdb.SetArgs(ctx, k, int64(v), redis.SetArgs{Mode: "NX", ExpireAt: end.Add(24 * time.Hour)}).Err()
	if errors.Is(err, redis.Nil) { // NX: the counter exists, seeded by another
		return nil
	}
	return err
}

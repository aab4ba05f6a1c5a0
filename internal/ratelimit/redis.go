package ratelimit

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rolter/rolter/internal/clock"
)

// script checks and takes (mode "t") or adjusts (mode "a") every limit of
// one request in one atomic step. KEYS are the limits' counters, each
// holding its TAT in microseconds since 2024-01-01 (Redis's own clock, so
// replicas' clocks need not agree; doubles hold that exactly to well
// below a microsecond). ARGV[1] is the mode, then one increment in
// microseconds per key. It answers {took, ahead_1, ..., ahead_n}: whether
// it took, and each TAT's lead over now before the call, in whole
// microseconds. A key whose bucket is full again is deleted, and every key
// expires when its bucket would be full anyway.
const script = `
local t = redis.call('TIME')
local now = (tonumber(t[1]) - 1704067200) * 1000000 + tonumber(t[2])
local tau = 60000000
local mode = ARGV[1]
local tats = {}
local ok = true
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  local tat = now
  if v then tat = math.max(tonumber(v), now) end
  tats[i] = tat
  if mode == 't' and tat + tonumber(ARGV[i + 1]) - now > tau then ok = false end
end
local out = {0}
if ok then
  out[1] = 1
  for i = 1, #KEYS do
    local new = tats[i] + tonumber(ARGV[i + 1])
    if new <= now then
      redis.call('DEL', KEYS[i])
    else
      redis.call('SET', KEYS[i], string.format('%.17g', new), 'PX', math.ceil((new - now) / 1000) + 1000)
    end
  end
end
for i = 1, #KEYS do out[i + 1] = math.ceil(tats[i] - now) end
return out
`

// RedisConfig configures the shared limiter.
type RedisConfig struct {
	// Client is the connection (NewClient makes one that answers within
	// its timeout); the limiter does not close it.
	Client redis.UniversalClient
	// Prefix starts every key, followed by "rl:" (default "rolter:"):
	// replicas that share limits use the same one.
	Prefix string
	// Timeout bounds one check; a slower answer counts as an outage
	// (default 50ms).
	Timeout time.Duration
	// ProbeEvery is how often an outage is probed for its end (default 1s).
	ProbeEvery time.Duration
	// Registry receives the fallback metrics (default: none).
	Registry prometheus.Registerer
}

// Redis shares limits between replicas through one Redis: every check is
// one EVALSHA of script. While Redis is unreachable or slower than the
// timeout it falls back to its Local limiter, which counts this replica's
// requests only (so N replicas admit up to N times a limit during an
// outage); it logs once per outage and probes for its end in Run.
type Redis struct {
	client  redis.UniversalClient
	script  *redis.Script
	local   *Local
	log     *slog.Logger
	prefix  string
	timeout time.Duration
	probe   time.Duration

	down      atomic.Bool
	downMu    sync.Mutex // orders the outage's log lines
	downSince time.Time
	gauge     prometheus.Gauge
	fallbacks prometheus.Counter
}

// DefaultTimeout bounds one shared check.
const DefaultTimeout = 50 * time.Millisecond

// NewClient returns a client for a redis:// or rediss:// URL that answers
// within timeout (DefaultTimeout when 0) whatever Redis does: no retries,
// socket and pool timeouts of timeout, context deadlines honoured. It does
// not connect yet; only a malformed URL is an error, and the error never
// quotes the URL (it may hold a password).
func NewClient(url string, timeout time.Duration) (*redis.Client, error) {
	// go-redis prints dial failures itself; the limiter logs an outage once.
	quietOnce.Do(func() { redis.SetLogger(quiet{}) })
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, errors.New("redis URL: cannot parse it (redis://[user:password@]host:port[/db])")
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	opt.MaxRetries = -1
	opt.DialTimeout = 2 * timeout
	opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = timeout, timeout, timeout
	opt.ContextTimeoutEnabled = true
	return redis.NewClient(opt), nil
}

// NewRedis returns the shared limiter on cfg.Client. An unreachable Redis
// is not an error: the limiter starts in fallback and Run finds it when it
// comes up.
func NewRedis(ctx context.Context, cfg RedisConfig, local *Local, log *slog.Logger) *Redis {
	if cfg.Prefix == "" {
		cfg.Prefix = "rolter:"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.ProbeEvery <= 0 {
		cfg.ProbeEvery = time.Second
	}
	r := &Redis{client: cfg.Client, script: redis.NewScript(script), local: local, log: log,
		prefix: cfg.Prefix + "rl:", timeout: cfg.Timeout, probe: cfg.ProbeEvery,
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "rolter_ratelimit_redis_fallback",
			Help: "1 while rate limits are counted locally because Redis is unreachable or slow, else 0."}),
		fallbacks: prometheus.NewCounter(prometheus.CounterOpts{Name: "rolter_ratelimit_fallback_checks_total",
			Help: "Rate limit checks answered by this replica's local counters because Redis was unavailable."}),
	}
	if cfg.Registry != nil {
		cfg.Registry.MustRegister(r.gauge, r.fallbacks)
	}
	pctx, cancel := context.WithTimeout(ctx, 4*cfg.Timeout)
	defer cancel()
	if err := r.client.Ping(pctx).Err(); err != nil {
		r.outage(err)
	} else if err := r.script.Load(pctx, r.client).Err(); err != nil {
		r.outage(err)
	}
	return r
}

var quietOnce sync.Once

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// Down reports whether checks are answered locally now.
func (r *Redis) Down() bool { return r.down.Load() }

// Run probes Redis while it is down, every ProbeEvery, until ctx ends.
func (r *Redis) Run(ctx context.Context) {
	t := time.NewTicker(r.probe)
	defer t.Stop()
	for clock.Wait(ctx, t.C) {
		if !r.down.Load() {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, r.timeout)
		err := r.client.Ping(pctx).Err()
		if err == nil {
			err = r.script.Load(pctx, r.client).Err()
		}
		cancel()
		if err == nil {
			r.recovered()
		}
	}
}

func (r *Redis) outage(err error) {
	r.downMu.Lock()
	defer r.downMu.Unlock()
	if r.down.Load() {
		return
	}
	r.downSince = time.Now()
	r.down.Store(true)
	r.gauge.Set(1)
	r.log.Warn("rate limits: Redis is unavailable or slow; counting on this replica only until it is back", "err", err, "timeout", r.timeout)
}

func (r *Redis) recovered() {
	r.downMu.Lock()
	defer r.downMu.Unlock()
	if !r.down.Load() {
		return
	}
	r.down.Store(false)
	r.gauge.Set(0)
	r.log.Info("rate limits: Redis is back; limits are shared again", "outage", time.Since(r.downSince).Round(time.Millisecond))
}

func (r *Redis) keys(limits []Limit) []string {
	keys := make([]string, len(limits))
	for i, lm := range limits {
		b := make([]byte, 0, len(r.prefix)+24)
		b = append(b, r.prefix...)
		b = append(b, byte(lm.Scope), ':')
		b = strconv.AppendInt(b, lm.ID, 10)
		b = append(b, ':', byte(lm.Unit))
		keys[i] = string(b)
	}
	return keys
}

// micros is the TAT movement of cost units in microseconds.
func micros(cost, perMinute int64) float64 {
	return float64(cost) * 60e6 / float64(perMinute)
}

func (r *Redis) run(ctx context.Context, mode string, limits []Limit, cost func(Limit) int64) ([]int64, error) {
	args := make([]any, 1, len(limits)+1)
	args[0] = mode
	for _, lm := range limits {
		args = append(args, strconv.FormatFloat(micros(cost(lm), lm.PerMinute), 'f', -1, 64))
	}
	// A client that went away does not make Redis look down.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout)
	defer cancel()
	return r.script.Run(cctx, r.client, r.keys(limits), args...).Int64Slice()
}

// Take implements Limiter.
func (r *Redis) Take(ctx context.Context, limits []Limit) Result {
	if r.down.Load() {
		r.fallbacks.Inc()
		return r.local.Take(ctx, limits)
	}
	// A cost over a limit's whole minute is refused without taking; the
	// script is still asked, for every limit's standing.
	out, err := r.run(ctx, "t", limits, func(lm Limit) int64 { return min(lm.Cost, lm.PerMinute+1) })
	if err != nil || len(out) != len(limits)+1 {
		if err == nil {
			err = errors.New("unexpected script answer")
		}
		r.outage(err)
		r.fallbacks.Inc()
		return r.local.Take(ctx, limits)
	}
	res := Result{Allowed: out[0] == 1, Denied: -1, States: make([]State, len(limits)), Shared: true}
	for i, lm := range limits {
		ahead := time.Duration(out[i+1]) * time.Microsecond
		if res.Allowed {
			res.States[i] = stateOf(lm.PerMinute, ahead+time.Duration(increment(lm.Cost, lm.PerMinute)))
			continue
		}
		res.States[i] = stateOf(lm.PerMinute, ahead)
		if lm.Cost > lm.PerMinute {
			res.refuse(i, 0, true)
		} else if wait := ahead + time.Duration(increment(lm.Cost, lm.PerMinute)) - time.Minute; wait > 0 {
			res.refuse(i, wait, false)
		}
	}
	if !res.Allowed && res.Denied < 0 { // refused by rounding at the edge
		res.refuse(0, time.Microsecond, false)
	}
	return res
}

// Adjust implements Limiter. A correction of a check answered locally is
// applied locally; one that Redis cannot take now is dropped (the limit
// then errs by that one request's estimate).
func (r *Redis) Adjust(ctx context.Context, limits []Limit, shared bool) {
	if !shared {
		r.local.Adjust(ctx, limits, false)
		return
	}
	if r.down.Load() {
		return
	}
	if _, err := r.run(ctx, "a", limits, func(lm Limit) int64 { return clampCost(lm.Cost, lm.PerMinute) }); err != nil {
		r.outage(err)
	}
}

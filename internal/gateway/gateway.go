// Package gateway is rolter's data path: the OpenAI-compatible client API
// (/v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses,
// /v1/models).
//
// A request goes auth → resolve → pick target → pick key → rewrite model →
// forward → relay → account (serve, in this file). Routing state comes from
// the snapshot, never from the store; failures are classified in one table
// (failure.go) that drives failover, cooldowns, metrics and error codes.
package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/rolter/rolter/internal/clock"
	"github.com/rolter/rolter/internal/cooldown"
	"github.com/rolter/rolter/internal/defaults"
	"github.com/rolter/rolter/internal/h1client"
	"github.com/rolter/rolter/internal/jsonscan"
	"github.com/rolter/rolter/internal/netguard"
	"github.com/rolter/rolter/internal/ratelimit"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/spend"
	"github.com/rolter/rolter/internal/store"
)

// Config tunes the data path. Zero values take the defaults shown.
type Config struct {
	MaxBody          int64         // request body limit (default 32 MiB)
	MaxAttempts      int           // attempts per request, failovers included (default 3)
	RetryDeadline    time.Duration // no new attempt starts after this long (default 10m)
	FirstByteTimeout time.Duration // per attempt, until the first response byte (default 300s); per provider override
	IdleTimeout      time.Duration // between stream events (default 120s); per provider override
	MaxResponse      int64         // non-streamed response body limit (default 64 MiB)
	// BodyTimeout bounds how long a client may take to send its request
	// body; then it gets 408 and the connection closes (default 30s).
	BodyTimeout time.Duration
	// ClientWriteTimeout bounds one write to the client (an event, a
	// response): a client that stops reading is cancelled as client_slow
	// after it, and no upstream is blamed (default 60s).
	ClientWriteTimeout time.Duration
	// MaxBodyInFlight bounds the request body bytes held by all requests
	// together (default 1 GiB): beyond it a request gets 503 overloaded
	// instead of growing memory. MaxBody bounds one request, this all.
	MaxBodyInFlight int64
	// CredentialCooldown is how long a pool key the upstream refused with
	// 401 or 403 stays out of rotation (default 10m); editing the key's
	// secret ends it.
	CredentialCooldown time.Duration
	Cooldown           cooldown.Config
	// AllowLinkLocal lets the gateway dial link-local and cloud metadata
	// addresses; by default a base URL whose name resolves to one fails at
	// dial time.
	AllowLinkLocal bool
	// UpstreamClient chooses the upstream transport when Options has
	// none: "h1" (h1client, the default) or "std" (NewTransport, Go's
	// http.Transport). rolter serve --upstream-client.
	UpstreamClient string
}

// Upstream clients (Config.UpstreamClient).
const (
	UpstreamH1  = "h1"
	UpstreamStd = "std"
)

func (c *Config) defaults() {
	defaults.Set(&c.MaxBody, 32<<20)
	defaults.Set(&c.MaxAttempts, 3)
	defaults.Set(&c.RetryDeadline, 10*time.Minute)
	defaults.Set(&c.FirstByteTimeout, 300*time.Second)
	defaults.Set(&c.IdleTimeout, 120*time.Second)
	defaults.Set(&c.MaxResponse, 64<<20)
	defaults.Set(&c.BodyTimeout, 30*time.Second)
	defaults.Set(&c.MaxBodyInFlight, 1<<30)
	defaults.Set(&c.ClientWriteTimeout, 60*time.Second)
	defaults.Set(&c.CredentialCooldown, 10*time.Minute)
}

// UsageSink receives one record per request; it must not block.
type UsageSink interface{ Record(store.UsageRecord) }

// Gateway serves the client API.
type Gateway struct {
	cfg    Config
	log    *slog.Logger
	clock  clock.Clock
	client *http.Client
	// transport sends upstream requests directly: the client's redirect
	// and header-copying machinery is not needed (redirects are never
	// followed) and costs allocations per request. By default an
	// h1client.Client: the whole exchange on the request's goroutine.
	transport http.RoundTripper
	usage     UsageSink
	metrics   *Metrics
	table     atomic.Pointer[table]
	mu        sync.Mutex // serialises table rebuilds and state sweeps
	mux       *http.ServeMux
	// states remembers deployments' health and load by (provider, model)
	// across configuration changes; nstates and stateBytes bound it, and
	// sweep forgets what nobody uses (table.go).
	states     sync.Map
	nstates    atomic.Int64
	stateBytes atomic.Int64
	// bodyBytes are the request body bytes held now, by all requests.
	bodyBytes atomic.Int64
	lastSweep atomic.Int64 // clock nanoseconds
	// limiters hold each route's in-flight count across table rebuilds.
	limiters sync.Map // route id -> *policy.Limiter
	// drainCuts hold each fleet provider's *drainCut across table
	// rebuilds (drain.go).
	drainCuts sync.Map // provider id -> *drainCut
	ready     Readiness
	probes    ProbeTrigger // nil: no probe is asked for on a refusal
	// healthGen counts targets that began cooling (not cooldowns merely
	// extended): plans rebuild their routable sets when it moves
	// (routable.go).
	healthGen atomic.Uint64
	spend     *spend.Tracker    // nil: budgets are not checked (spend.go)
	rates     ratelimit.Limiter // rpm and tpm limits (limits.go)
	tracer    trace.Tracer      // nil: requests are not traced (trace.go)
}

// Options are the collaborators of a Gateway.
type Options struct {
	Log      *slog.Logger
	Clock    clock.Clock           // default: the system clock
	Usage    UsageSink             // default: discard
	Registry prometheus.Registerer // default: a private registry
	// Transport for upstream requests (default: by Config.UpstreamClient).
	Transport http.RoundTripper
	// Readiness gates providers on their active health and discovered
	// metadata (default: every provider ready, nothing discovered).
	Readiness Readiness
	// Probes is asked to probe a provider at once when a connection to it
	// is refused (default: none).
	Probes ProbeTrigger
	// Spend checks and charges key and project budgets (default: none).
	Spend *spend.Tracker
	// Limiter enforces rpm and tpm limits (default: in memory).
	Limiter ratelimit.Limiter
	// Tracer makes the client API's spans (trace.go); nil, the default,
	// traces nothing at no cost.
	Tracer trace.TracerProvider
}

type discardUsage struct{}

func (discardUsage) Record(store.UsageRecord) {}

// New returns a Gateway that follows snap.
func New(cfg Config, snap *snapshot.Holder, o Options) *Gateway {
	cfg.defaults()
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Clock == nil {
		o.Clock = clock.System
	}
	if o.Usage == nil {
		o.Usage = discardUsage{}
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.Limiter == nil {
		o.Limiter = ratelimit.NewLocal(o.Clock, 0)
	}
	if o.Transport == nil {
		if cfg.UpstreamClient == UpstreamStd {
			o.Transport = NewTransport(cfg.AllowLinkLocal)
		} else {
			o.Transport = h1client.New(h1client.Config{Dial: netguard.Dialer(cfg.AllowLinkLocal).DialContext})
		}
	}
	g := &Gateway{cfg: cfg, log: o.Log, clock: o.Clock, usage: o.Usage, ready: o.Readiness, probes: o.Probes, spend: o.Spend, rates: o.Limiter,
		client:    &http.Client{Transport: o.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		transport: o.Transport,
		metrics:   NewMetrics(o.Registry), mux: http.NewServeMux()}
	if o.Tracer != nil {
		g.tracer = o.Tracer.Tracer(tracerName)
	}
	o.Registry.MustRegister(tableCollector{g: g, collect: g.collectCooldowns, desc: prometheus.NewDesc("rolter_cooldown",
		"Targets and keys per provider by breaker state.", []string{"org", "provider", "kind", "state"}, nil)})
	o.Registry.MustRegister(tableCollector{g: g, collect: g.collectReady, desc: prometheus.NewDesc("rolter_provider_ready",
		"1 while the provider is ready (its active health and metadata probes pass), else 0.", []string{"org", "provider"}, nil)})
	o.Registry.MustRegister(tableCollector{g: g, collect: g.collectKeyCooldowns, desc: prometheus.NewDesc("rolter_key_cooldown",
		"1 for each pool key, by its id, with its breaker state (closed, cooling, half_open).", []string{"org", "provider", "key", "state"}, nil)})
	o.Registry.MustRegister(tableCollector{g: g, collect: g.collectContext, desc: prometheus.NewDesc("rolter_provider_context_tokens",
		"The context (tokens) a ready provider is routed on: discovered for upstream-metadata providers, else configured.", []string{"org", "provider"}, nil)})
	snap.OnSwap(func(s *snapshot.Snapshot) {
		g.mu.Lock()
		defer g.mu.Unlock()
		prev := g.table.Load()
		g.table.Store(g.buildTable(s, prev))
		if prev != nil {
			g.pruneSeries(prev.snap, s)
		}
	})
	for _, ep := range []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses", "/v1/messages", "/v1/messages/count_tokens"} {
		g.mux.HandleFunc("POST "+ep, g.serve)
	}
	g.mux.HandleFunc("GET /v1/models", g.listModels)
	g.mux.HandleFunc("GET /v1/models/{id...}", g.getModel)
	g.mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, newError(http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+r.URL.Path))
	})
	return g
}

// Refresh brings the routing table up to date with the providers'
// readiness; call it when readiness or discovered metadata change, so
// /v1/models and admission follow without an admin write. Only what
// depends on the providers whose readiness changed is derived anew.
func (g *Gateway) Refresh() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t := g.table.Load(); t != nil {
		g.table.Store(g.refreshTable(t))
	}
}

// NewTransport is a stock http.Transport with the settings of the
// gateway's own upstream client (h1client): its pool sizes, idle timeout
// and dialer, HTTP/1.1, no compression. `rolter bench`'s floor (a stock
// httputil.ReverseProxy) uses it, so that the two compare like for like.
func NewTransport(allowLinkLocal bool) *http.Transport {
	return &http.Transport{
		Proxy:               nil, // upstreams are addressed directly
		DialContext:         netguard.Dialer(allowLinkLocal).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		// Identity bodies: the model field is rewritten in place, and
		// transparent gzip would cost CPU on both sides for no gain on a
		// LAN.
		DisableCompression: true,
		ForceAttemptHTTP2:  false,
	}
}

// CloseIdleConnections closes idle upstream connections (at shutdown).
func (g *Gateway) CloseIdleConnections() { g.client.CloseIdleConnections() }

// Metrics returns the gateway's metrics (for wiring the usage drop count).
func (g *Gateway) Metrics() *Metrics { return g.metrics }

// ServeHTTP implements http.Handler. Every answer, the gateway's own
// errors included, carries the request id.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ensureRequestID(w, r)
	if g.tracer != nil {
		g.serveTraced(w, r)
		return
	}
	g.mux.ServeHTTP(w, r)
}

// exchange is the state of one client request as it moves along the path.
type exchange struct {
	start     time.Time
	requestID string // the client's X-Request-Id, or one made up; echoed and logged
	key       *snapshot.VirtualKey
	model     string // as the client sent it: the stable caller address
	stream    bool
	endpoint  string // upstream path under base_url, e.g. "/chat/completions"
	// plan is the address being served; origin the one the client's model
	// resolved to, which differs while a fallback route serves
	// (fallback.go), and fallback names that route.
	plan     *routePlan
	origin   *routePlan
	table    *table // the table the request resolved in: its fallbacks' too
	fallback string
	skip     []*routePlan // routes this request tried or found unable to take it (fallback.go)
	facts    *planFacts   // the plan's admission facts (routable.go), set by admit
	adm      *admission   // per policy results (admit.go); nil for endpoints without output
	// api is the client's API (from the endpoint): it picks each target's
	// pairing (tg.provider.pairs[api]) and the shape of the gateway's own
	// errors.
	api clientAPI
	// translated is the request in the other API's shape, for targets of
	// the other kind (OpenAI chat for a Messages client, or Messages for a
	// chat client); nil when no target needs it.
	translated []byte
	// clientUsage: a chat client asked for a usage chunk itself.
	clientUsage bool
	// addedUsage: the gateway asked the upstream for a usage chunk the client
	// did not ask for, so the relay strips it.
	addedUsage bool
	// client writes the answer under the client write timeout.
	client *clientWriter
	// rate holds the token limits to correct when the request ends.
	rate rateTicket
	// body is the one walk of the client's body and the attempts' buffer.
	body requestBody
	// tr is the request's trace; nil when not tracing (trace.go).
	tr *reqTrace

	// outcome: forward sets status, class, attempts and target;
	// record copies the rest from the last attempt's outcome, once.
	status        int
	class         Class
	attempts      int
	tier          int // index into facts.tiers of the tier being tried (pick.go)
	tierSpent     int // attempts counted against MaxAttempts on that tier
	target        *targetRT
	upstreamModel string
	ttft          time.Duration
	promptTokens  int
	outputTokens  int
	// upstreamTTFB is the current attempt's time to the upstream's
	// response headers, for its metric (observe.go); 0 until they came.
	upstreamTTFB time.Duration

	// tail is a stream past its first event, for serve to relay
	// (finishStream); nil otherwise.
	tail *streamTail
	// held is the request body bytes counted in Gateway.bodyBytes;
	// releases are the route admissions to release when the request ends
	// (leave).
	held     int64
	releases []func()
}

// serve is the request path, top to bottom: handle answers the request
// or sends it upstream; a stream whose first event came is relayed from
// here (finishStream), when handle's frames are gone, so that the
// goroutine waits for the next event on a small stack.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request) {
	g.metrics.inFlight.Inc()
	defer g.metrics.inFlight.Dec()
	x := exchanges.Get().(*exchange)
	defer x.recycle() // deferred first: runs after every other use of x
	defer g.leave(x)
	if !g.handle(w, r, x) {
		return
	}
	if x.tail != nil {
		// The request's body was dropped with the first event (relay): a
		// long stream no longer counts it against MaxBodyInFlight.
		g.bodyBytes.Add(-x.held)
		x.held = 0
		x.tail.run()
		g.finishStream(x)
	}
	x.client.done()
	g.account(x)
}

// leave releases what the request held until its end: its route
// admissions and its body bytes; and, after a panic, the upstream of a
// stream not relayed to its end, whose attempt it ends as the gateway's
// own failure (ClassSkipped: no breaker blames the upstream), so that the
// provider's slot, the deployment's load and a half-open probe are given
// back.
func (g *Gateway) leave(x *exchange) {
	if t := x.tail; t != nil {
		o := t.o
		t.close()
		x.tail = nil
		g.endAttempt(x, t.att, o.with(result{class: ClassSkipped, status: t.status, committed: true, err: errStreamPanicked}))
	}
	for i := len(x.releases) - 1; i >= 0; i-- {
		x.releases[i]()
	}
	g.bodyBytes.Add(-x.held)
}

// handle is the request path up to the upstream's answer: it reports
// false when it answered the request itself (and accounted for it), true
// when forward did (with x.tail set for a stream whose rest serve
// relays).
//
//go:noinline
func (g *Gateway) handle(w http.ResponseWriter, r *http.Request, x *exchange) bool {
	t := g.table.Load()
	x.start, x.endpoint, x.requestID, x.table = time.Now(), r.URL.Path[len("/v1"):], ensureRequestID(w, r), t
	if g.tracer != nil {
		x.tr = traceOf(r, x)
	}
	x.api = apiOf(x.endpoint)
	key, ok := authenticate(t.snap, r, x.start)
	if !ok {
		x.writeError(w, errUnauthorized)
		g.metrics.unauthenticated.Inc()
		return false
	}
	x.key = key
	body, held, aerr := g.readBody(w, r)
	x.held = held
	if aerr != nil {
		g.fail(w, x, aerr)
		return false
	}
	if aerr := x.parse(body); aerr != nil {
		if aerr.Code == codeInvalidModel {
			// Nothing is recorded of an oversized model, not even a usage
			// row or a metric: only the refusal.
			x.writeError(w, aerr)
			return false
		}
		g.fail(w, x, aerr)
		return false
	}
	if !allowed(key, x.model) {
		g.fail(w, x, newError(http.StatusForbidden, "model_not_allowed",
			"this API key may not use model "+quoteModel(x.model)))
		return false
	}
	if x.plan, aerr = g.resolve(t, key, x.model, r.Header.Get("X-Rolter-Provider")); aerr != nil {
		g.fail(w, x, aerr)
		return false
	}
	x.origin = x.plan
	if aerr := g.checkBudget(w, r, x); aerr != nil {
		g.fail(w, x, aerr)
		return false
	}
	release, aerr := g.admitRoute(w, x)
	if aerr != nil {
		g.fail(w, x, aerr)
		return false
	}
	if release != nil {
		x.releases = append(x.releases, release)
	}
	if aerr := g.limit(r.Context(), w, x); aerr != nil {
		g.fail(w, x, aerr)
		return false
	}
	if aerr := x.translate(x.translateInput()); aerr != nil {
		g.fail(w, x, aerr)
		return false
	}
	if x.stream {
		x.addedUsage = x.body.usageEdit(x.endpoint)
	}
	x.client = newClientWriter(w, g.cfg.ClientWriteTimeout)
	g.forward(w, r, x)
	return true
}

// exchanges recycles exchange structs (over a kilobyte each). At a large
// catalog the allocator's runway is the size of the catalog's heap, so
// what a request allocates lands on memory no request touched since the
// last collection: cache misses, and page faults where the runtime had
// returned the pages. A recycled exchange is memory the previous request
// just used. The attempts' body buffer is not kept: a transport may still
// read it, and requestBody.scan starts each request afresh anyway.
var exchanges = sync.Pool{New: func() any { return new(exchange) }}

// recycle returns x to exchanges when serve is done with it. A traced
// request's x is left to the collector: the server span reads it after
// serve returns (trace.go).
func (x *exchange) recycle() {
	if x.tr != nil {
		return
	}
	releases := x.releases[:0]
	clear(x.releases)
	*x = exchange{releases: releases}
	exchanges.Put(x)
}

// requestID returns the client's X-Request-Id when it is a sane token (1 to
// 128 visible ASCII characters), else a new random one, so a caller can
// find its request in the gateway's and the upstream's logs.
func requestID(h http.Header) string {
	if id := h.Get("X-Request-Id"); id != "" && len(id) <= 128 {
		ok := true
		for i := 0; i < len(id) && ok; i++ {
			ok = id[i] > ' ' && id[i] < 0x7f
		}
		if ok {
			return id
		}
	}
	var b [16]byte
	return string(strconv.AppendUint(append(b[:0], "req-"...), rand.Uint64(), 36))
}

// initialBody is the most a declared Content-Length may allocate before
// the bytes arrive: a client that declares 32 MiB and sends one byte holds
// this much, not 32 MiB.
const initialBody = 64 << 10

// readBody reads the whole request body once, refusing more than MaxBody
// before any upstream is dialled, and giving up after BodyTimeout. held is
// what it added to the gateway's in-flight body bytes; the caller
// subtracts it when the request ends.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request) (body []byte, held int64, _ *apiError) {
	if r.ContentLength > g.cfg.MaxBody {
		return nil, 0, newError(http.StatusRequestEntityTooLarge, "body_too_large", "the request body exceeds the gateway's limit")
	}
	rc := http.NewResponseController(w)
	deadline := rc.SetReadDeadline(time.Now().Add(g.cfg.BodyTimeout)) == nil
	size := bytes.MinRead
	if r.ContentLength > 0 {
		// The declared length is the client's claim: grow as bytes arrive.
		size = int(min(r.ContentLength, initialBody))
	}
	cr := &budgetReader{r: http.MaxBytesReader(w, r.Body, g.cfg.MaxBody), g: g}
	body, err := readBodyBytes(cr, size)
	if deadline {
		// The connection's reads must not time out while the response
		// streams: the server watches them for the client going away.
		_ = rc.SetReadDeadline(time.Time{})
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, cr.held, newError(http.StatusRequestEntityTooLarge, "body_too_large", "the request body exceeds the gateway's limit")
	case errors.Is(err, errBodyBudget):
		w.Header().Set("Connection", "close")
		e := newError(http.StatusServiceUnavailable, "overloaded",
			"the gateway holds as many request bytes as it may (--max-body-in-flight); retry shortly")
		e.retryAfter = 1
		return nil, cr.held, e
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.Header().Set("Connection", "close")
		return nil, cr.held, newError(http.StatusRequestTimeout, "body_timeout",
			"the request body did not arrive within "+g.cfg.BodyTimeout.String())
	case err != nil:
		return nil, cr.held, newError(http.StatusBadRequest, "invalid_request", "could not read the request body")
	}
	return body, cr.held, nil
}

// readBodyBytes reads r to its end into a buffer of size bytes and one more (so
// that a body of the declared length ends without a reallocation), grown
// as io.ReadAll grows it beyond that.
func readBodyBytes(r io.Reader, size int) ([]byte, error) {
	b := make([]byte, 0, size+1)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF { //nolint:errorlint // io.Reader's contract: EOF itself
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

var errBodyBudget = errors.New("gateway: request body bytes in flight at their limit")

// budgetReader counts the bytes read into the gateway's in-flight body
// bytes, and fails once they would pass MaxBodyInFlight: however many
// connections send real bodies at once, what they hold is bounded.
type budgetReader struct {
	r    io.Reader
	g    *Gateway
	held int64
}

func (b *budgetReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 {
		b.held += int64(n)
		if b.g.bodyBytes.Add(int64(n)) > b.g.cfg.MaxBodyInFlight {
			return n, errBodyBudget
		}
	}
	return n, err
}

// MaxModelLen caps the model string a client may send, in bytes. Every
// address the gateway serves (route names, slug/model, group/model) fits
// well within it.
const MaxModelLen = 256

const codeInvalidModel = "invalid_model"

// capModel cuts an upstream-chosen model id (a discovered id, the model a
// response names) to MaxModelLen bytes at a character boundary, so the
// x-rolter-upstream-model header and usage rows stay bounded whatever an
// upstream answers.
func capModel(m string) string {
	if len(m) <= MaxModelLen {
		return m
	}
	cut := MaxModelLen
	for cut > 0 && !utf8.RuneStart(m[cut]) {
		cut--
	}
	return strings.Clone(m[:cut]) // do not pin the upstream's whole body
}

// parse walks the body once (requestBody.scan) for the model, the stream
// flag and everything later steps read, without decoding it.
func (x *exchange) parse(body []byte) *apiError {
	// The whole body is checked so that a second "model" key, which the
	// upstream's decoder would prefer, cannot slip past the allowlist.
	if err := x.body.scan(body, x.endpoint); err != nil {
		return newError(http.StatusBadRequest, "invalid_request", "the request body must be a JSON object")
	}
	if x.body.dupModel {
		return newError(http.StatusBadRequest, "invalid_request", "\"model\" appears more than once")
	}
	model, ok, err := x.body.model()
	switch {
	case errors.Is(err, jsonscan.ErrNotString):
		return newError(http.StatusBadRequest, "invalid_request", "model must be a string")
	case !ok || model == "":
		return newError(http.StatusBadRequest, "invalid_request", "\"model\" is required")
	case len(model) > MaxModelLen:
		// Refused before anything is keyed by it: no deployment state,
		// metric series or usage row ever holds a client string longer
		// than the cap.
		return newError(http.StatusBadRequest, codeInvalidModel,
			"model is "+strconv.Itoa(len(model))+" bytes; the limit is "+strconv.Itoa(MaxModelLen))
	}
	x.model = model
	x.stream = x.body.stream
	return nil
}

// fail answers a request that never reached an upstream.
func (g *Gateway) fail(w http.ResponseWriter, x *exchange, e *apiError) {
	x.writeError(w, e)
	x.status = e.status
	g.account(x)
}

// account records metrics and usage, exactly once per request.
func (g *Gateway) account(x *exchange) {
	if x.key == nil {
		return // unauthenticated: no project to bill, nothing to record
	}
	g.settle(x)
	label, provider := "", ""
	rec := store.UsageRecord{CreatedAt: x.start, OrgID: x.key.Project.OrgID, ProjectID: x.key.ProjectID, KeyID: x.key.ID,
		Address: x.model, Status: x.status, Class: string(x.class),
		Attempts: x.attempts, Latency: time.Since(x.start), TTFT: x.ttft, PromptTokens: x.promptTokens,
		CompletionTokens: x.outputTokens, Stream: x.stream, UpstreamModel: x.upstreamModel}
	if x.origin != nil {
		label, rec.Route, rec.AddressKind = x.origin.route, x.origin.route, string(x.origin.kind)
	}
	if x.target != nil {
		provider = x.target.provider.slug
		rec.ProviderID, rec.ProviderSlug = x.target.provider.id, provider
		g.countServed(x, &rec)
	}
	g.charge(x, &rec)
	g.usage.Record(rec)
	g.observeRequest(x, label, provider, rec.Latency)
	if !g.log.Enabled(context.Background(), slog.LevelDebug) {
		return // building the attributes costs allocations per request
	}
	g.log.Debug("request", "request_id", x.requestID, "address", rec.AddressKind, "route", rec.Route, "provider", provider, "upstream_model", x.upstreamModel,
		"status", x.status, "class", x.class, "attempts", x.attempts, "took", rec.Latency)
}

// Package server assembles `rolter serve`: it opens the store, performs the
// first-start bootstrap and config import, builds the routing snapshot,
// mounts the HTTP surfaces and shuts down gracefully.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/adminapi"
	"github.com/rolter/rolter/internal/clock"
	"github.com/rolter/rolter/internal/config"
	"github.com/rolter/rolter/internal/fleet"
	"github.com/rolter/rolter/internal/gateway"
	"github.com/rolter/rolter/internal/netguard"
	"github.com/rolter/rolter/internal/ratelimit"
	"github.com/rolter/rolter/internal/readiness"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/spend"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/sqlstore"
	"github.com/rolter/rolter/internal/tracing"
	"github.com/rolter/rolter/internal/ui"
	"github.com/rolter/rolter/internal/usage"
)

// Config is the start-up contract of SPEC §1.
type Config struct {
	Listen     string        // (default 127.0.0.1:4000)
	DataDir    string        // (default ./rolter-data)
	Store      string        // "sqlite" (default), "sqlite:PATH" or a postgres:// URL
	ConfigFile string        // YAML imported on start; optional
	Demo       bool          // register the built-in simulated upstream
	AdminToken secret.Secret // ROLTER_ADMIN_TOKEN
	MasterKey  secret.Secret // ROLTER_MASTER_KEY
	// MetricsToken, when set, is required on /metrics as Authorization:
	// Bearer (ROLTER_METRICS_TOKEN); unset, /metrics is open.
	MetricsToken    secret.Secret
	ShutdownTimeout time.Duration // in-flight grace on SIGTERM (default 30s)
	// ReadHeaderTimeout bounds how long a client may take to send its
	// request headers, so a slow-loris client cannot hold a connection
	// (default 10s).
	ReadHeaderTimeout time.Duration
	// AdminListen, when set (--admin-listen), is the one address that
	// serves /admin, /ui and /metrics; Listen then serves only the data
	// path (/v1), the fleet box endpoints (/vllm), the demo upstream and
	// the health endpoints, so it can be exposed to clients alone.
	AdminListen string
	// AllowLinkLocalUpstreams lets provider base_urls name link-local and
	// cloud metadata addresses (refused by default).
	AllowLinkLocalUpstreams bool
	// UISecureCookie marks the web console's session cookie Secure on
	// every response (behind a TLS proxy that sends no X-Forwarded-Proto).
	UISecureCookie bool
	Gateway        gateway.Config
	Usage          usage.Config
	Metadata       readiness.Config // active health probes and upstream discovery
	// Fleet configures the vLLM fleet control plane: /vllm/config and
	// /vllm/report, and the controller that registers serving hosts.
	Fleet FleetConfig
	// Redis, a redis:// URL (--redis, ROLTER_REDIS), shares rate limit
	// counters between replicas; unset, each replica counts in memory.
	Redis string
	// RedisPrefix starts the counters' keys (default "rolter:", then
	// "rl:" for rate limits);
	// replicas that share limits use the same one.
	RedisPrefix string
	// RedisTimeout bounds one shared check; a slower or failed one is
	// answered by local counters until Redis answers a probe (default 50ms).
	RedisTimeout time.Duration
	// Out receives the first-start banner (default: discarded).
	Out io.Writer
	// SpendRefresh is how often budgeted spend is re-read from the store
	// to see other replicas' costs (default 5s; package spend).
	SpendRefresh time.Duration
}

func (c *Config) defaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:4000"
	}
	if c.DataDir == "" {
		c.DataDir = "./rolter-data"
	}
	if c.Store == "" {
		c.Store = "sqlite"
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = 10 * time.Second
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
}

// FleetConfig configures the fleet control plane.
type FleetConfig struct {
	Controller fleet.ControllerConfig
	Handler    fleet.HandlerConfig
	// DisableController stops this replica from probing and registering
	// hosts (the endpoints still serve).
	DisableController bool
}

// MaxHeaderBytes bounds a request's header block.
const MaxHeaderBytes = 64 << 10

// Server is a started gateway.
type Server struct {
	// Addr is the bound listen address (useful with port 0).
	Addr string
	// AdminAddr is the bound --admin-listen address; with none, the admin
	// surfaces are on Addr and AdminAddr equals it.
	AdminAddr string

	cfg Config
	log *slog.Logger
	db  *sqlstore.DB
	// servers are the client listener's and, with --admin-listen, the
	// admin listener's; each one's Serve result arrives on done.
	servers  []*http.Server
	draining atomic.Bool
	done     chan error
	// Background work owned by the server: stopped after the HTTP server
	// has drained, so the last requests' usage is still written.
	bgStop context.CancelFunc
	bgDone chan struct{}
	// closeIdle release outbound keep-alive connections at shutdown.
	closeIdle []func()
	// unmark releases the store's serving mark (sqlstore.HoldServing).
	unmark func()
}

// Start opens the store, prepares it and starts serving. It returns once
// the listener is bound; Wait blocks until shutdown.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (*Server, error) {
	cfg.defaults()
	if err := checkAdminToken(cfg.AdminToken); err != nil {
		return nil, err
	}
	sealer, err := secret.NewSealer(cfg.MasterKey)
	if err != nil {
		return nil, fmt.Errorf("ROLTER_MASTER_KEY: %w", err)
	}
	db, err := sqlstore.Open(ctx, cfg.Store, cfg.DataDir, sealer)
	if err != nil {
		return nil, err
	}
	sqlstore.WarnLooseFiles(log, cfg.Store, cfg.DataDir)
	// The mark rolter restore looks for: replacing the store under a
	// running gateway would leave it serving its old routing state.
	unmark, err := db.HoldServing(ctx, cfg.Store, cfg.DataDir)
	if err != nil {
		log.Warn("could not mark the store as served; rolter restore will not see this gateway", "err", err)
		unmark = func() {}
	}
	s := &Server{cfg: cfg, log: log, db: db, done: make(chan error, 2), unmark: unmark}
	if err := s.prepare(ctx); err != nil {
		unmark()
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *Server) prepare(ctx context.Context) error {
	snap := snapshot.NewHolder(s.db, s.log)
	// The admin service needs a snapshot for its rebuilds; bootstrap writes
	// before any exists, so load an initial one first.
	if err := snap.Reload(ctx); err != nil {
		return err
	}
	svc := admin.NewService(s.db, snap, s.log)
	// Replicas sharing a PostgreSQL store announce their writes; each
	// rebuilds its snapshot when another one does (LISTEN/NOTIFY).
	publish := func(ctx context.Context) {
		if err := s.db.NotifyChange(ctx); err != nil {
			s.log.Warn("could not announce a config change to other replicas; they pick it up at their next change", "err", err)
		}
	}
	svc.SetPublisher(publish)
	// A write to fleet hosts or fleet keys alone (no snapshot holds them)
	// makes the other replicas reload their fleet endpoints only.
	publishFleet := func(ctx context.Context) {
		if err := s.db.NotifyFleetChange(ctx); err != nil {
			s.log.Warn("could not announce a fleet change to other replicas; their fleet endpoints pick it up within a minute", "err", err)
		}
	}
	svc.SetFleetPublisher(publishFleet)
	svc.SetAllowLinkLocalUpstreams(s.cfg.AllowLinkLocalUpstreams)
	fresh, err := bootstrap(ctx, svc, s.cfg.AdminToken, s.cfg.Out)
	if err != nil {
		return err
	}
	if s.cfg.ConfigFile != "" {
		f, err := config.Load(s.cfg.ConfigFile)
		if err != nil {
			return err
		}
		if err := config.Apply(ctx, svc, f, s.cfg.Out, s.log); err != nil {
			return err
		}
	}
	lns, err := s.listen()
	if err != nil {
		return err
	}
	closeListeners := func() {
		for _, ln := range lns {
			ln.Close()
		}
	}

	// mux serves the client listener; adminMux is the same one, or with
	// --admin-listen the admin listener's own.
	mux := http.NewServeMux()
	adminMux := mux
	if len(lns) > 1 {
		adminMux = http.NewServeMux()
	}
	s.health(mux, snap)
	if adminMux != mux {
		s.health(adminMux, snap)
	}
	adminMux.Handle(adminapi.Prefix+"/", adminapi.NewHandler(svc))
	adminMux.Handle(ui.Prefix+"/", ui.New(svc, s.log, ui.Options{SecureCookie: s.cfg.UISecureCookie}))
	adminMux.Handle("GET "+ui.Prefix, http.RedirectHandler(ui.Prefix+"/", http.StatusMovedPermanently))

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		// The store's pool (go_sql_*{db_name="postgres"}): a rising
		// sessions count at a steady load means connections are discarded.
		collectors.NewDBStatsCollector(s.db.SQL(), s.db.Dialect()),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "rolter_store_sessions_opened_total",
			Help: "Database sessions the store's pool has opened (PostgreSQL; 0 on SQLite).",
		}, func() float64 { return float64(s.db.SessionsOpened()) }))
	rec := usage.New(s.db, s.cfg.Usage, s.log)
	limiter, runLimiter, rdb, err := s.rateLimiter(ctx, reg)
	if err != nil {
		closeListeners()
		return err
	}
	dialer := netguard.Dialer(s.cfg.AllowLinkLocalUpstreams)
	// Probes keep no connection between rounds when their interval is
	// longer than ProbeIdleTimeout; the idle timeout reaps what a failed
	// probe left. The readiness cache and the fleet controller share it.
	probeTransport := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4, DialContext: dialer.DialContext,
		IdleConnTimeout: readiness.ProbeIdleTimeout}
	s.cfg.Gateway.AllowLinkLocal = s.cfg.AllowLinkLocalUpstreams
	s.closeIdle = append(s.closeIdle, probeTransport.CloseIdleConnections)
	mcfg := s.cfg.Metadata
	mcfg.Dial = dialer.DialContext // probes that close their connection skip the transport
	probes := readiness.New(mcfg, clock.System, &http.Client{Transport: probeTransport}, s.log)
	// Sync before the gateway builds its first table, so it sees every
	// provider's initial readiness.
	snap.OnSwap(syncProbes(probes.Sync))
	// Budgets: spend is read from the usage table (durable, shared through
	// the store). With Redis, a spend.RedisCounter shared by every replica
	// is the primary counter and the store's is its fallback.
	spendCounter := spend.NewStoreCounter(s.db, s.cfg.SpendRefresh, nil)
	budgets := spend.NewTracker(spendCounter, nil, s.log, nil)
	if rdb != nil {
		prefix := s.cfg.RedisPrefix
		if prefix == "" {
			prefix = "rolter:"
		}
		budgets = spend.NewTracker(spend.NewRedisCounter(rdb, s.db, prefix, s.cfg.RedisTimeout), spendCounter, s.log, nil)
	}
	// OpenTelemetry traces when an OTLP endpoint is set (OTEL_* env).
	tracer, stopTracing, err := tracing.Setup(ctx, s.log)
	if err != nil {
		closeListeners()
		return err
	}
	gw := gateway.New(s.cfg.Gateway, snap, gateway.Options{Log: s.log, Usage: rec, Registry: reg, Readiness: probes, Probes: probes, Spend: budgets, Limiter: limiter,
		Tracer: tracer})
	s.closeIdle = append(s.closeIdle, gw.CloseIdleConnections)
	probes.OnChange(gw.Refresh)
	svc.SetReadiness(probes)
	rec.OnDrop = gw.Metrics().UsageDropped
	rec.OnReject = gw.Metrics().UsageRejected
	// The fleet endpoints answer from memory: every snapshot swap (a
	// registration, a drain, another replica's announcement) and every
	// admin write to hosts or fleet keys makes them reload.
	fcfg := s.cfg.Fleet.Handler
	fcfg.HostsChanged = publishFleet
	fleetHandler := fleet.NewHandler(s.db, fcfg, s.log)
	snap.OnSwap(func(*snapshot.Snapshot) { fleetHandler.Invalidate() })
	svc.SetFleetChanged(fleetHandler.Invalidate)
	bg, stop := context.WithCancel(context.Background())
	s.bgStop, s.bgDone = stop, make(chan struct{})
	var bgWG sync.WaitGroup
	bgWG.Add(4)
	go func() { defer bgWG.Done(); fleetHandler.Run(bg) }()
	go func() { defer bgWG.Done(); spendCounter.Run(bg) }()
	go func() { defer bgWG.Done(); rec.Run(bg) }()
	go func() { defer bgWG.Done(); probes.Run(bg) }()
	if runLimiter != nil {
		bgWG.Add(1)
		go func() { defer bgWG.Done(); runLimiter(bg) }()
	}
	if stopTracing != nil {
		// After the listeners drained: the last requests' spans are sent.
		bgWG.Add(1)
		go func() { defer bgWG.Done(); <-bg.Done(); s.flushTraces(stopTracing) }()
	}
	if !s.cfg.Fleet.DisableController {
		ccfg := s.cfg.Fleet.Controller
		ccfg.Lease = s.db.NewLease("fleet-controller")
		ccfg.AllowLinkLocal = s.cfg.AllowLinkLocalUpstreams
		ccfg.Registered = func(h *store.Host) bool { return routed(snap.Current(), h) }
		ccfg.Drains = gw
		ccfg.Registry = reg
		// One prober per fleet host: the controller's probes of
		// registered hosts stand in for the readiness cache's.
		ccfg.Readings = probes
		if ccfg.Client == nil {
			ccfg.Client = &http.Client{Transport: probeTransport}
			ccfg.Dial = fleet.ProbeDialer(dialer).DialContext // probes that close their connection skip the transport
		}
		ccfg.LastFetch = fleetHandler.LastFetch
		ccfg.Changes = fleetHandler.Generation
		ccfg.OrgName = func(id int64) string { return orgName(snap.Current(), id) }
		// On PostgreSQL other replicas may route too; their in-flight
		// requests are not counted here, so drains end at their deadline.
		ccfg.PeersUncounted = s.db.Dialect() == "postgres"
		ctl := fleet.NewController(s.db, ccfg, s.log, func(ctx context.Context) {
			fleetHandler.Invalidate() // a drain's apply flags, even if the rebuild fails
			if err := snap.Reload(ctx); err != nil {
				s.log.Error("snapshot rebuild after fleet registration failed; serving the previous one", "err", err)
			}
			publish(ctx)
		})
		svc.SetFleetHealth(ctl)
		bgWG.Add(1)
		go func() { defer bgWG.Done(); ctl.Run(bg) }()
	}
	bgWG.Add(1)
	go func() {
		defer bgWG.Done()
		s.db.ListenChanges(bg, func(c sqlstore.Change) {
			// Whether or not the rebuild succeeds (OnSwap invalidates
			// only after one that does).
			fleetHandler.Invalidate()
			if c == sqlstore.ChangeFleet {
				return
			}
			if err := snap.Reload(bg); err != nil && bg.Err() == nil {
				s.log.Error("snapshot rebuild after another replica's change failed; serving the previous one", "err", err)
			}
		}, s.log)
	}()
	go func() { bgWG.Wait(); close(s.bgDone) }()
	// The fleet box endpoints stay with the data path: GPU boxes call
	// them with fleet keys, like clients call /v1 with virtual keys, and
	// need no access to the admin listener.
	mux.Handle("/v1/", gw)
	mux.Handle("/vllm/", fleetHandler)
	adminMux.Handle("GET /metrics", requireToken(s.cfg.MetricsToken, "rolter-metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	if s.cfg.Demo {
		// The simulated upstream is dialled by the gateway at Addr.
		if err := s.mountDemo(ctx, mux, svc); err != nil {
			closeListeners()
			stop()
			<-s.bgDone
			return err
		}
	}
	handlers := []http.Handler{mux, adminMux}
	for i, ln := range lns {
		srv := s.newHTTPServer(handlers[i])
		s.servers = append(s.servers, srv)
		go func() { s.done <- srv.Serve(ln) }()
	}
	attrs := []any{"addr", s.Addr, "store", s.db.Dialect(), "demo", s.cfg.Demo, "ui", uiURL(s.AdminAddr)}
	if s.AdminAddr != s.Addr {
		attrs = append(attrs, "admin_addr", s.AdminAddr)
	}
	s.log.Info("rolter serving", attrs...)
	if fresh {
		// Under the banner that shows the admin token to log in with; a
		// later start prints nothing (the log line above has the address).
		fmt.Fprintf(s.cfg.Out, "  web UI:       %s  (log in with the admin token)\n", uiURL(s.AdminAddr))
	}
	return nil
}

// listen binds the client address and, with --admin-listen, the admin
// address, in that order.
func (s *Server) listen() ([]net.Listener, error) {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s.Addr, s.AdminAddr = ln.Addr().String(), ln.Addr().String()
	if s.cfg.AdminListen == "" {
		return []net.Listener{ln}, nil
	}
	aln, err := net.Listen("tcp", s.cfg.AdminListen)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("--admin-listen: %w", err)
	}
	s.AdminAddr = aln.Addr().String()
	return []net.Listener{ln, aln}, nil
}

// health mounts /healthz and /readyz, which both listeners serve.
func (s *Server) health(mux *http.ServeMux, snap *snapshot.Holder) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		// Ready = able to route: a snapshot is loaded and we are not
		// draining. A store outage does not make us unready, because the
		// request path serves from the snapshot.
		if s.draining.Load() || snap.Current() == nil {
			http.Error(w, "not ready\n", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ready\n")
	})
}

// newHTTPServer is one listener's server: the same limits and middleware
// on both.
func (s *Server) newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           writeDeadline(clientWriteTimeout(s.cfg.Gateway), accessLog(s.log, h)),
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		// Clients send a few short headers; 64 KiB leaves room for long
		// tokens and refuses header floods with 431.
		MaxHeaderBytes: MaxHeaderBytes,
		// Idle keep-alive connections are closed after this long, so idle
		// clients cannot pin connections forever.
		IdleTimeout: 2 * time.Minute,
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// localHostPort is the bound listen address as a client on this machine
// reaches it: an unspecified host (0.0.0.0, ::) becomes 127.0.0.1.
func localHostPort(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// uiURL is the address of the web UI, for the start-up line.
func uiURL(addr string) string {
	if hp, err := localHostPort(addr); err == nil {
		addr = hp
	}
	return "http://" + addr + ui.Prefix + "/"
}

// rateLimiter is the in-memory limiter, or with --redis the shared one
// that falls back to it; run, when set, must run in the background. rdb
// is the Redis client (nil without --redis), which budgets share.
func (s *Server) rateLimiter(ctx context.Context, reg prometheus.Registerer) (_ ratelimit.Limiter, run func(context.Context), rdb *redis.Client, _ error) {
	local := ratelimit.NewLocal(clock.System, 0)
	if s.cfg.Redis == "" {
		return local, nil, nil, nil
	}
	client, err := ratelimit.NewClient(s.cfg.Redis, s.cfg.RedisTimeout)
	if err != nil {
		return nil, nil, nil, err
	}
	s.closeIdle = append(s.closeIdle, func() { _ = client.Close() })
	rl := ratelimit.NewRedis(ctx, ratelimit.RedisConfig{Client: client, Prefix: s.cfg.RedisPrefix, Timeout: s.cfg.RedisTimeout, Registry: reg}, local, s.log)
	return rl, rl.Run, client, nil
}

// routed reports whether sn routes to host h: its route has a target on
// the host's provider.
// orgName is the name of the org with id in sn, "" when unknown.
func orgName(sn *snapshot.Snapshot, id int64) string {
	name := ""
	if sn != nil {
		sn.EachOrg(func(o *snapshot.Org) {
			if o.ID == id {
				name = o.Name
			}
		})
	}
	return name
}

func routed(sn *snapshot.Snapshot, h *store.Host) bool {
	if sn == nil || h.ProviderID == 0 {
		return false
	}
	found := false
	sn.EachOrg(func(o *snapshot.Org) {
		if o.ID != h.OrgID {
			return
		}
		for _, pj := range o.Projects.All() {
			if pj.ID != h.ProjectID {
				continue
			}
			if rt := pj.Routes.At(h.ModelName); rt != nil {
				for _, t := range rt.Targets {
					if t.Provider.ID == h.ProviderID {
						found = true
					}
				}
			}
		}
	})
	return found
}

// probeTargets lists every live provider for the readiness cache.
func probeTargets(sn *snapshot.Snapshot) []readiness.Provider {
	var out []readiness.Provider
	sn.EachOrg(func(o *snapshot.Org) {
		for _, p := range o.Providers.All() {
			out = append(out, probeTarget(o.Name, p))
		}
	})
	return out
}

// probeTarget is the provider p of the org named org as the readiness
// cache probes it; the first pool key is the probe's credential.
func probeTarget(org string, p *snapshot.Provider) readiness.Provider {
	mp := readiness.Provider{ID: p.ID, Kind: p.Kind, BaseURL: p.BaseURL, Upstream: p.MetadataSource == store.MetadataUpstream,
		Org: org, Slug: p.Slug}
	if len(p.Keys) > 0 {
		mp.Credential = p.Keys[0].Secret
	}
	return mp
}

// syncProbes returns the snapshot hook that gives the readiness cache
// (sync: its Sync) every live provider. Sync takes the whole list and is
// O(providers) (a map of them, a hash of each credential), which at
// 10,000 providers was most of an admin write's time to visible; so a
// snapshot patched from the previous one with no change to what the cache
// probes (a route, a group, a virtual key, a provider's name or models)
// skips it. The hook runs under the Holder's lock, one snapshot at a time.
func syncProbes(sync func([]readiness.Provider)) func(*snapshot.Snapshot) {
	var last *snapshot.Snapshot
	return func(sn *snapshot.Snapshot) {
		prev := last
		last = sn
		if d := sn.DiffFrom(prev); d != nil && sameProbeTargets(prev, sn, d.Providers) {
			return
		}
		sync(probeTargets(sn))
	}
}

// sameProbeTargets reports whether the providers ids, the ones sn changed
// from prev, are probed in sn as they were in prev (or absent in both).
// Providers not in ids are the same objects in both snapshots, and an
// org renamed is built anew (no diff), so they need no look.
func sameProbeTargets(prev, sn *snapshot.Snapshot, ids []int64) bool {
	for _, id := range ids {
		was, now := prev.Provider(id), sn.Provider(id)
		switch {
		case was == nil && now == nil:
			continue
		case was == nil || now == nil:
			return false
		}
		wasOrg, nowOrg := prev.OrgByID(was.OrgID), sn.OrgByID(now.OrgID)
		if wasOrg == nil || nowOrg == nil || probeTarget(wasOrg.Name, was) != probeTarget(nowOrg.Name, now) {
			return false
		}
	}
	return true
}

// flushTraces exports the spans still queued and stops the exporter,
// giving up after the shutdown timeout.
func (s *Server) flushTraces(stop func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := stop(ctx); err != nil {
		s.log.Warn("OpenTelemetry: could not flush the last spans", "err", err)
	}
}

// Shutdown stops accepting, lets in-flight requests finish for up to the
// shutdown timeout, then closes the store.
func (s *Server) Shutdown() error {
	s.draining.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	errs := make([]error, len(s.servers))
	var wg sync.WaitGroup
	for i, srv := range s.servers {
		wg.Go(func() {
			errs[i] = srv.Shutdown(ctx)
			if errors.Is(errs[i], context.DeadlineExceeded) {
				s.log.Warn("shutdown timeout: closing remaining connections", "timeout", s.cfg.ShutdownTimeout)
				errs[i] = srv.Close()
			}
		})
	}
	wg.Wait()
	err := errors.Join(errs...)
	for range s.servers {
		if serr := <-s.done; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = serr
		}
	}
	s.bgStop()
	<-s.bgDone
	for _, f := range s.closeIdle {
		f()
	}
	s.unmark()
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	return err
}

// Run starts the server and shuts it down when ctx is cancelled (SIGTERM,
// SIGINT). A clean shutdown returns nil.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	s, err := Start(ctx, cfg, log)
	if err != nil {
		if ctx.Err() != nil { // stopped during start-up: that is what was asked
			log.Info("stopped during start-up")
			return nil
		}
		return err
	}
	select {
	case <-ctx.Done():
		log.Info("shutting down", "grace", s.cfg.ShutdownTimeout)
	case err := <-s.done:
		s.done <- err // Shutdown reads it
	}
	return s.Shutdown()
}

// requireToken guards next with a bearer token when tok is set; the
// comparison is of hashes, in constant time.
func requireToken(tok secret.Secret, realm string, next http.Handler) http.Handler {
	if tok.IsZero() {
		return next
	}
	want := secret.HashOf(tok.Reveal())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := secret.Bearer(r.Header.Get("Authorization"))
		if !ok || !secret.HashOf(got).Equal(want) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+realm+`"`)
			http.Error(w, "a metrics token is required: send Authorization: Bearer <token>\n", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// statusWriter records the status for the access log and keeps Flush
// working for streamed responses.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write notes the implicit 200, so a panic after it is known to have come
// after the answer began.
func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// clientWriteTimeout is the gateway's client write timeout, defaulted
// like the gateway defaults it.
func clientWriteTimeout(c gateway.Config) time.Duration {
	if c.ClientWriteTimeout > 0 {
		return c.ClientWriteTimeout
	}
	return 60 * time.Second
}

// writeDeadline bounds every response's writes: a client that stops
// reading cannot hold a connection's goroutine in a blocked write, on any
// endpoint. The deadline is set when a request starts (the data path then
// extends it write by write) and again when its handler returns, for the
// bytes net/http writes after it (the last buffered bytes, the chunked
// terminator); the next request on the connection sets its own.
func writeDeadline(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(time.Now().Add(d))
		next.ServeHTTP(w, r)
		_ = rc.SetWriteDeadline(time.Now().Add(d))
	})
}

// accessLog gives every request its id (the client's X-Request-Id when
// sane, else a new one), echoed on the answer whatever serves it, and logs
// one line per request: method, path, status, duration, request id.
// Successful health probes (/healthz, /readyz) log at debug, the rest at
// info. Headers and bodies are never logged; they carry credentials. A
// handler's panic is logged with its stack and answered with a 500 in the
// client's API shape, or, when the answer had begun, by cutting the
// connection, which is the only way left to tell the client it is
// incomplete.
func accessLog(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := gateway.RequestID(r.Header)
		w.Header().Set(gateway.HeaderRequestID, id)
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			p := recover()
			if p == nil {
				logAccess(log, r, sw.status, start, id)
				return
			}
			if p == http.ErrAbortHandler { //nolint:errorlint // a sentinel panic value, compared as net/http does
				panic(p) // a deliberate cut; net/http closes quietly
			}
			log.Error("panic while serving a request", "request_id", id, "method", r.Method, "path", r.URL.Path,
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if sw.status != 0 {
				logAccess(log, r, sw.status, start, id)
				panic(http.ErrAbortHandler)
			}
			if strings.HasPrefix(r.URL.Path, "/v1/") {
				gateway.WriteInternalError(sw, r)
			} else {
				http.Error(sw, "internal error; the log has the details under the X-Request-Id of this answer\n", http.StatusInternalServerError)
			}
			logAccess(log, r, sw.status, start, id)
		}()
		next.ServeHTTP(sw, r)
	})
}

// logAccess writes the access line of one request.
func logAccess(log *slog.Logger, r *http.Request, status int, start time.Time, id string) {
	if status == 0 {
		status = http.StatusOK
	}
	level := slog.LevelInfo
	if (r.URL.Path == "/healthz" || r.URL.Path == "/readyz") && status < 400 {
		level = slog.LevelDebug
	}
	ctx := context.Background()
	if !log.Enabled(ctx, level) {
		return
	}
	log.Log(ctx, level, "http", "method", r.Method, "path", r.URL.Path, "status", status, "took", time.Since(start), "request_id", id)
}

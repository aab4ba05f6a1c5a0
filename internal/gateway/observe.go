package gateway

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rolter/rolter/internal/snapshot"
)

// What the data path tells the operator at the points where something
// happens to a request: an attempt ends, the request fails over, a
// breaker's cooldown begins or ends, the request ends. forward and account
// call these hooks; the log lines and metric updates live here.
//
// Every log line of a request carries the same fields, in this order:
// request_id, org, project, route (empty for slug/model and group/model
// addresses), provider (the slug, never the numeric id), class and
// upstream_status (0 when the upstream never answered). Every value is
// bounded and comes from configuration, a fixed set, or the request id
// (at most 128 visible bytes); none is a secret or an upstream body.
//
// Per-request metric updates use children resolved once per provider (and
// project and route) and table, not WithLabelValues per request: looking a
// child up hashes and checks every label value, which is most of what a
// counter update costs.

// requestAttrs are the fields every log line of a request starts with.
func requestAttrs(x *exchange, p *providerRT, class Class, status int, extra int) []slog.Attr {
	a := make([]slog.Attr, 0, 7+extra)
	project, route := "", ""
	if x.key != nil {
		project = x.key.Project.Name
	}
	if x.plan != nil {
		route = x.plan.route
	}
	return append(a, slog.String("request_id", x.requestID), slog.String("org", p.org), slog.String("project", project),
		slog.String("route", route), slog.String("provider", p.slug), slog.String("class", string(class)),
		slog.Int("upstream_status", status))
}

// observeAttempt updates an attempt's metrics: attempts by class, and the
// provider's upstream time to first byte and duration.
func (g *Gateway) observeAttempt(x *exchange, tg *targetRT, res result, began time.Time) {
	s := tg.provider.observers().series(g.metrics, tg.provider)
	s.attempt(g.metrics, tg.provider, res.class).Inc()
	s.duration.Observe(time.Since(began).Seconds())
	if x.upstreamTTFB > 0 {
		s.ttfb.Observe(x.upstreamTTFB.Seconds())
		x.upstreamTTFB = 0
	}
}

// observeFailover counts a failover and logs it at info: the request moves
// on from the previous attempt (prev) to target next. Its class and
// upstream_status are the previous attempt's, which made it move.
func (g *Gateway) observeFailover(x *exchange, next *targetRT, prev outcome) {
	route := x.plan.route
	if x.origin != nil {
		route = x.origin.route // the caller's route, also while a fallback route is tried
	}
	g.metrics.failovers.WithLabelValues(x.key.Project.Org.Name, x.key.Project.Name, route).Inc()
	ctx := context.Background()
	if !g.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	from := ""
	if x.target != nil {
		from = x.target.provider.slug
	}
	attrs := append(requestAttrs(x, next.provider, prev.class, prev.status, 2),
		slog.String("from_provider", from), slog.Int("attempt", x.attempts+1))
	g.log.LogAttrs(ctx, slog.LevelInfo, "failing over to another target", attrs...)
}

// keyUntil is the end of key's cooldown; zero for no key.
func keyUntil(key *keyRT) time.Time {
	if key == nil {
		return time.Time{}
	}
	return key.breaker.Until()
}

// observeCooldowns logs the cooldowns an attempt's verdict changed: the
// target's (the deployment: provider and model) and the pool key's. A
// cooldown that began, or was pushed further out, logs at warn with its
// end; one that ended (the half-open probe succeeded) logs at info.
func (g *Gateway) observeCooldowns(x *exchange, tg *targetRT, key *keyRT, wasTarget, wasKey time.Time, res result) {
	now := tg.breaker.Until()
	if !now.Equal(wasTarget) {
		g.logCooldown(x, tg, nil, wasTarget, now, res)
	}
	if key != nil {
		if k := key.breaker.Until(); !k.Equal(wasKey) {
			g.logCooldown(x, tg, key, wasKey, k, res)
		}
	}
}

func (g *Gateway) logCooldown(x *exchange, tg *targetRT, key *keyRT, was, until time.Time, res result) {
	level, msg := slog.LevelWarn, "cooldown began"
	if until.IsZero() {
		level, msg = slog.LevelInfo, "cooldown ended"
	}
	ctx := context.Background()
	if !g.log.Enabled(ctx, level) {
		return
	}
	attrs := requestAttrs(x, tg.provider, res.class, res.status, 4)
	if key != nil {
		attrs = append(attrs, slog.String("kind", "key"), slog.Int64("key_id", key.id))
	} else {
		attrs = append(attrs, slog.String("kind", "target"), slog.String("upstream_model", capModel(tg.id.model)))
	}
	if !until.IsZero() {
		now := g.clock.Now()
		attrs = append(attrs, slog.Time("until", until), slog.Duration("cooldown", until.Sub(now).Round(time.Millisecond)))
		if was.After(now) {
			msg = "cooldown extended" // it was cooling already (a longer Retry-After)
		}
	}
	g.log.LogAttrs(ctx, level, msg, attrs...)
}

// observeRequest counts a request that ended, its tokens, its duration
// and its time to first token.
func (g *Gateway) observeRequest(x *exchange, route, provider string, took time.Duration) {
	m := g.metrics
	org, project := x.key.Project.Org.Name, x.key.Project.Name
	if x.target == nil {
		// Refused before any upstream (404, 400, 429, ...): no provider,
		// no tokens; rarer than answers, so looked up each time.
		m.requests.WithLabelValues(org, project, route, provider, statusLabel(x.status), string(x.class)).Inc()
		m.latency.WithLabelValues(org, project, route).Observe(took.Seconds())
		return
	}
	s := x.target.provider.observers().request(m, x.key.Project, route, provider)
	if x.status == 200 && x.class == ClassNone {
		s.ok.Inc()
	} else {
		m.requests.WithLabelValues(org, project, route, provider, statusLabel(x.status), string(x.class)).Inc()
	}
	s.latency.Observe(took.Seconds())
	if x.ttft > 0 {
		s.ttft.Observe(x.ttft.Seconds())
	}
	if x.promptTokens > 0 {
		s.prompt.Add(float64(x.promptTokens))
	}
	if x.outputTokens > 0 {
		s.completion.Add(float64(x.outputTokens))
	}
}

// provObs is a provider's resolved metric children for one table (it lives
// in providerRT, rebuilt with every table). A provider gets one on its
// first attempt: most providers of a large catalog may never serve a
// request, and neither they nor their series cost anything until then.
type provObs struct {
	once sync.Once
	s    *provSeries
	reqs sync.Map // reqKey -> *reqSeries
}

// provSeries are a provider's per-attempt children.
type provSeries struct {
	ttfb, duration prometheus.Observer
	attempts       [len(attemptClasses)]lazyCounter
}

// reqSeries are the children of the requests one project sends to one
// provider through one route ("" for slug/model and group addresses).
type reqSeries struct {
	ok                 prometheus.Counter // status 200, no failure class
	prompt, completion prometheus.Counter
	latency, ttft      prometheus.Observer
}

type reqKey struct {
	project *snapshot.Project
	route   string
}

// lazyCounter is a child made on first use, so that a class an attempt
// never ended with has no series.
type lazyCounter struct {
	once sync.Once
	c    prometheus.Counter
}

// attemptClasses are the values of rolter_upstream_attempts_total's class
// label: every class an attempt can end with.
var attemptClasses = [...]Class{ClassNone, ClassConnect, ClassTimeout, ClassServer, ClassRateLimited, ClassRequestTimeout,
	ClassCaller, ClassClientCancelled, ClassStreamBroken, ClassIdleTimeout, ClassCredential, ClassForbidden,
	ClassClientSlow, ClassSkipped, ClassModelGone}

// observers are p's metric children, made on first use.
func (p *providerRT) observers() *provObs {
	if o := p.obs.Load(); o != nil {
		return o
	}
	p.obs.CompareAndSwap(nil, new(provObs))
	return p.obs.Load()
}

func (o *provObs) series(m *Metrics, p *providerRT) *provSeries {
	o.once.Do(func() {
		o.s = &provSeries{ttfb: m.upstreamTTFB.WithLabelValues(p.org, p.slug),
			duration: m.upstreamDuration.WithLabelValues(p.org, p.slug)}
	})
	return o.s
}

func (s *provSeries) attempt(m *Metrics, p *providerRT, c Class) prometheus.Counter {
	for i := range attemptClasses {
		if attemptClasses[i] == c {
			lc := &s.attempts[i]
			lc.once.Do(func() { lc.c = m.attempts.WithLabelValues(p.org, p.slug, attemptLabel(c)) })
			return lc.c
		}
	}
	return m.attempts.WithLabelValues(p.org, p.slug, attemptLabel(c))
}

func (o *provObs) request(m *Metrics, pj *snapshot.Project, route, provider string) *reqSeries {
	k := reqKey{pj, route}
	if v, ok := o.reqs.Load(k); ok {
		return v.(*reqSeries)
	}
	org, project := pj.Org.Name, pj.Name
	s := &reqSeries{ok: m.requests.WithLabelValues(org, project, route, provider, statusLabel(200), string(ClassNone)),
		prompt:     m.promptTokens.WithLabelValues(org, project, route, provider),
		completion: m.completionTokens.WithLabelValues(org, project, route, provider),
		latency:    m.latency.WithLabelValues(org, project, route),
		ttft:       m.ttft.WithLabelValues(org, project, route)}
	v, _ := o.reqs.LoadOrStore(k, s)
	return v.(*reqSeries)
}

// seriesNames are the operator's entities of one snapshot that label
// series: orgs, projects, routes and providers, by name.
type seriesNames struct {
	orgs      map[string]bool
	projects  map[[2]string]bool
	routes    map[[3]string]bool
	providers map[[2]string]bool
}

func namesOf(s *snapshot.Snapshot) *seriesNames {
	n := &seriesNames{orgs: map[string]bool{}, projects: map[[2]string]bool{}, routes: map[[3]string]bool{}, providers: map[[2]string]bool{}}
	s.EachOrg(func(o *snapshot.Org) {
		n.orgs[o.Name] = true
		for _, p := range o.Providers.All() {
			n.providers[[2]string{o.Name, p.Slug}] = true
		}
		for _, pj := range o.Projects.All() {
			n.projects[[2]string{o.Name, pj.Name}] = true
			for _, r := range pj.Routes.All() {
				n.routes[[3]string{o.Name, pj.Name, r.Model}] = true
			}
		}
	})
	return n
}

// partialDeleter is a metric vector whose series can be removed by some of
// their labels.
type partialDeleter interface {
	DeletePartialMatch(prometheus.Labels) int
}

// labelled is a vector and the label names it has.
type labelled struct {
	v      partialDeleter
	labels []string
}

func (m *Metrics) vectors() []labelled {
	full := []string{"org", "project", "route", "provider"}
	return []labelled{
		{m.requests, full}, {m.promptTokens, full}, {m.completionTokens, full},
		{m.latency, full[:3]}, {m.ttft, full[:3]}, {m.failovers, full[:3]},
		{m.attempts, []string{"org", "provider"}}, {m.credentialFailures, []string{"org", "provider"}},
		{m.drainCuts, []string{"org", "provider"}}, {m.refusals, []string{"org", "provider"}},
		{m.upstreamTTFB, []string{"org", "provider"}}, {m.upstreamDuration, []string{"org", "provider"}},
	}
}

// forget removes the series of every vector that has all of l's labels
// and matches them.
func (m *Metrics) forget(l prometheus.Labels) {
	for _, v := range m.vectors() {
		has := 0
		for _, name := range v.labels {
			if _, ok := l[name]; ok {
				has++
			}
		}
		if has == len(l) {
			v.v.DeletePartialMatch(l)
		}
	}
}

// pruneSeries removes the series of the orgs, projects, routes and
// providers that was had and s no longer has (deleted or renamed), so that
// the series count follows the configuration. The caller holds g.mu. A
// request still in flight on the previous table may add to a removed
// series; its increment is lost or, rarely, brings the series back until
// the entity's name is used again. When s was patched from was, only what
// the patch changed is looked at (issue 21).
func (g *Gateway) pruneSeries(was, s *snapshot.Snapshot) {
	if s == nil || was == nil {
		return
	}
	m := g.metrics
	if d := s.DiffFrom(was); d != nil {
		// A patch never writes orgs or projects (those build anew).
		for _, c := range d.Routes {
			if c.Old == nil {
				continue
			}
			if pj := s.Project(c.Old.ProjectID); pj != nil && pj.Routes.At(c.Old.Model) == nil {
				m.forget(prometheus.Labels{"org": pj.Org.Name, "project": pj.Name, "route": c.Old.Model})
			}
		}
		for _, id := range d.Providers {
			if old := was.Provider(id); old != nil {
				if o := s.OrgByID(old.OrgID); o != nil && o.Providers.At(old.Slug) == nil {
					m.forget(prometheus.Labels{"org": o.Name, "provider": old.Slug})
				}
			}
		}
		return
	}
	next, prev := namesOf(s), namesOf(was)
	for o := range prev.orgs {
		if !next.orgs[o] {
			m.forget(prometheus.Labels{"org": o})
		}
	}
	for k := range prev.projects {
		if next.orgs[k[0]] && !next.projects[k] {
			m.forget(prometheus.Labels{"org": k[0], "project": k[1]})
		}
	}
	for k := range prev.routes {
		if next.projects[[2]string{k[0], k[1]}] && !next.routes[k] {
			m.forget(prometheus.Labels{"org": k[0], "project": k[1], "route": k[2]})
		}
	}
	for k := range prev.providers {
		if next.orgs[k[0]] && !next.providers[k] {
			m.forget(prometheus.Labels{"org": k[0], "provider": k[1]})
		}
	}
}

// collectKeyCooldowns reports each pool key's breaker state, by its id
// (never its secret): one series per key, 1, with the state as a label.
func (g *Gateway) collectKeyCooldowns(t *table, gauge func(v float64, labels ...string)) {
	for _, p := range t.providers.All() {
		for _, k := range p.keys {
			gauge(1, p.org, p.slug, strconv.FormatInt(k.id, 10), k.breaker.State())
		}
	}
}

// collectContext reports the context each ready provider is routed on:
// discovered for an upstream-metadata provider, configured otherwise; no
// series when unknown.
func (g *Gateway) collectContext(t *table, gauge func(v float64, labels ...string)) {
	for _, p := range t.providers.All() {
		st := g.status(p)
		c := p.contextLimit
		if p.upstream {
			c = st.Facts.Context
		}
		if st.Ready && c > 0 {
			gauge(float64(c), p.org, p.slug)
		}
	}
}

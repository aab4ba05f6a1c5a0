package gateway

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rolter/rolter/internal/cooldown"
)

// Metrics are the data path's Prometheus series. Label values are bounded:
// org and project names, route names and provider slugs come from the
// operator's configuration, status and class from fixed sets; nothing comes
// from client strings or secrets. A slug/model address is labelled by its
// provider, never by model. Routes are named per project and providers per
// org, so their series carry org (and project): two orgs' "qwen3" stay
// apart.
type Metrics struct {
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	ttft       *prometheus.HistogramVec
	inFlight   prometheus.Gauge
	attempts   *prometheus.CounterVec
	failovers  *prometheus.CounterVec
	usageDrops prometheus.Counter
	// usageRejects counts usage records the store refused for their values
	// (the rest of their batch was stored).
	usageRejects prometheus.Counter
	// credentialFailures counts upstream 401/403 answers to the
	// operator's credentials, per provider: a revoked or wrong pool key.
	credentialFailures *prometheus.CounterVec
	// unauthenticated is rolter_requests_total's series for a missing or
	// refused virtual key: no org, project, route nor provider is known,
	// and the class is empty as for every refusal before an upstream.
	unauthenticated prometheus.Counter
	// drainCuts counts requests cut at a fleet host's drain deadline.
	drainCuts *prometheus.CounterVec
	// refusals counts refused connections, each of which took its
	// provider out of routing at once (routable.go).
	refusals *prometheus.CounterVec
	// served counts route requests by tier and fallback route (fallback.go).
	served *prometheus.CounterVec
	// Tokens and upstream latency (observe.go resolves their children
	// once per provider and route, not per request).
	promptTokens, completionTokens *prometheus.CounterVec
	upstreamTTFB, upstreamDuration *prometheus.HistogramVec
}

// nativeHistogram makes a histogram both a classic one (buckets, which
// every Prometheus scrapes) and a native one (exponential buckets, for a
// server with native histograms enabled), with at most 100 native buckets
// per series.
func nativeHistogram(name, help string, buckets []float64) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets,
		NativeHistogramBucketFactor: 1.1, NativeHistogramMaxBucketNumber: 100, NativeHistogramMinResetDuration: time.Hour}
}

// NewMetrics registers the data path metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	buckets := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rolter_requests_total", Help: "Client requests by route, provider, HTTP status and failure class.",
		}, []string{"org", "project", "route", "provider", "status", "class"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rolter_request_duration_seconds", Help: "Client request duration, to the last byte.", Buckets: buckets,
		}, []string{"org", "project", "route"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rolter_time_to_first_token_seconds", Help: "Time to the first streamed event.", Buckets: buckets,
		}, []string{"org", "project", "route"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rolter_in_flight_requests", Help: "Client requests being served.",
		}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rolter_upstream_attempts_total", Help: "Upstream attempts by provider and outcome class (\"ok\" on success).",
		}, []string{"org", "provider", "class"}),
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rolter_failovers_total", Help: "Attempts that moved on to another candidate.",
		}, []string{"org", "project", "route"}),
		usageDrops: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rolter_usage_dropped_total", Help: "Usage records dropped: buffer full or store unavailable.",
		}),
		credentialFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rolter_upstream_credential_failures_total", Help: "Upstream 401/403 answers to a pool key (or a keyless provider), by provider.",
		}, []string{"org", "provider"}),
		usageRejects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rolter_usage_rejected_total", Help: "Usage records the store refused for their values; the rest of their batch was stored.",
		}),
	}
	m.drainCuts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rolter_fleet_drain_cut_requests_total", Help: "Requests still in flight to a fleet host at its drain deadline, cut so the host could restart.",
	}, []string{"org", "provider"})
	reg.MustRegister(m.drainCuts)
	m.served = servedMetric(reg)
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rolter_upstream_refusals_total", Help: "Connections an upstream refused; each takes the provider out of routing until a probe brings it back.",
	}, []string{"org", "provider"})
	reg.MustRegister(m.refusals)
	tokenLabels := []string{"org", "project", "route", "provider"}
	m.promptTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rolter_prompt_tokens_total", Help: "Prompt (input) tokens the upstreams reported, by route and provider.",
	}, tokenLabels)
	m.completionTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rolter_completion_tokens_total", Help: "Completion (output) tokens the upstreams reported, by route and provider.",
	}, tokenLabels)
	m.upstreamTTFB = prometheus.NewHistogramVec(nativeHistogram("rolter_upstream_ttfb_seconds",
		"Upstream attempts, from sending the request to the upstream's response headers.", buckets), []string{"org", "provider"})
	m.upstreamDuration = prometheus.NewHistogramVec(nativeHistogram("rolter_upstream_duration_seconds",
		"Upstream attempts, from their start to their end (the last byte relayed, or the failure).", buckets), []string{"org", "provider"})
	reg.MustRegister(m.promptTokens, m.completionTokens, m.upstreamTTFB, m.upstreamDuration)
	m.unauthenticated = m.requests.WithLabelValues("", "", "", "", statusLabel(http.StatusUnauthorized), string(ClassNone))
	reg.MustRegister(m.requests, m.latency, m.ttft, m.inFlight, m.attempts, m.failovers, m.usageDrops, m.credentialFailures, m.usageRejects)
	return m
}

// UsageDropped counts dropped usage records; wire it to the recorder.
func (m *Metrics) UsageDropped(n int) { m.usageDrops.Add(float64(n)) }

// UsageRejected counts usage records the store refused; wire it to the
// recorder's OnReject.
func (m *Metrics) UsageRejected(n int) { m.usageRejects.Add(float64(n)) }

func statusLabel(code int) string { return strconv.Itoa(code) }

// tableCollector reports a gauge computed at scrape time from the current
// routing table, so it costs no per-request work. Before the first table
// it reports nothing.
type tableCollector struct {
	g       *Gateway
	desc    *prometheus.Desc
	collect func(t *table, gauge func(v float64, labels ...string))
}

func (c tableCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c tableCollector) Collect(ch chan<- prometheus.Metric) {
	t := c.g.table.Load()
	if t == nil {
		return
	}
	c.collect(t, func(v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, labels...)
	})
}

// collectCooldowns reports how many targets and keys of each provider are
// in each breaker state.
func (g *Gateway) collectCooldowns(t *table, gauge func(v float64, labels ...string)) {
	type key struct{ org, provider, kind, state string }
	counts := map[key]int{}
	for _, p := range t.providers.All() {
		for _, k := range p.keys {
			counts[key{p.org, p.slug, "key", k.breaker.State()}]++
		}
	}
	g.states.Range(func(k, v any) bool {
		if p := t.providers.At(k.(targetID).provider); p != nil {
			counts[key{p.org, p.slug, "target", v.(*deployState).breaker.State()}]++
		}
		return true
	})
	g.unmadeTargets(t, func(p *providerRT) { counts[key{p.org, p.slug, "target", cooldown.StateClosed}]++ })
	for k, n := range counts {
		gauge(float64(n), k.org, k.provider, k.kind, k.state)
	}
}

// collectReady reports each provider's readiness as the request path sees
// it (1 ready, 0 not): the readiness cache's verdict, or ready for a
// configured provider it does not know yet. One series per provider of the
// routing table.
func (g *Gateway) collectReady(t *table, gauge func(v float64, labels ...string)) {
	for _, p := range t.providers.All() {
		v := 0.0
		if g.status(p).Ready {
			v = 1
		}
		gauge(v, p.org, p.slug)
	}
}

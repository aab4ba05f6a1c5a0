package fleet

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rolter/rolter/internal/store"
)

// The fleet's Prometheus series. They come from the replica that runs the
// controller (the lease holder); the others export none, so a sum over
// replicas counts each host once.
//
// Per-host series are labelled by host id: one series per live host and
// metric, gone when the host is retired. That is bounded by the fleet
// (operators add hosts; nothing a client sends adds one), and fine for
// thousands of boxes; hosts by state carry only org and state.
//
//	rolter_fleet_hosts{org,state}                        live hosts; state pending, serving, down, draining
//	rolter_fleet_host_liveness_age_seconds{org,host}     since the box's last GET /vllm/config (absent before it)
//	rolter_fleet_host_skew{org,host,kind}                1 when skewed: kind "revision" (the box runs an older
//	                                                     revision) or "args" (its served card disagrees with the
//	                                                     recipe it runs: served name, max_model_len)
//	rolter_fleet_drain_duration_seconds{org,outcome}     histogram: drain start to the box's restart allowed;
//	                                                     outcome "idle" (nothing left in flight) or "deadline"
//	rolter_fleet_restart_out_of_routing_seconds{org}     histogram: drain start to the host routed again
//
// The gauges are read at scrape time from the hosts as the controller last
// listed them (every sweep and every drain check, 1s by default) and its
// in-memory probe results; a scrape never queries the store.
type metrics struct {
	drain        *prometheus.HistogramVec
	outOfRouting *prometheus.HistogramVec
	hosts        *prometheus.Desc
	liveness     *prometheus.Desc
	skew         *prometheus.Desc
}

// hostSample is what the gauges need of a listed host.
type hostSample struct {
	id, org   int64
	state     string // HostDraining while a drain runs
	lastFetch *time.Time
	revSkew   bool
}

// liveStates are the states rolter_fleet_hosts reports for every org with
// a live host, zeros included, so an alert on one needs no absent().
var liveStates = []string{store.HostPending, store.HostServing, store.HostDown, store.HostDraining}

func newMetrics() *metrics {
	buckets := []float64{.1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}
	return &metrics{
		drain: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rolter_fleet_drain_duration_seconds", Buckets: buckets,
			Help: "Fleet host drains before a restart, from their start until the box may restart, by outcome (idle: nothing left in flight; deadline: drain_timeout passed).",
		}, []string{"org", "outcome"}),
		outOfRouting: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rolter_fleet_restart_out_of_routing_seconds", Buckets: buckets,
			Help: "Fleet host restarts, from the drain's start until probes showed the new revision serving and it was routed again.",
		}, []string{"org"}),
		hosts: prometheus.NewDesc("rolter_fleet_hosts", "Live fleet hosts by state (retired hosts are not counted).",
			[]string{"org", "state"}, nil),
		liveness: prometheus.NewDesc("rolter_fleet_host_liveness_age_seconds", "Seconds since the host's box last fetched GET /vllm/config; absent before its first fetch.",
			[]string{"org", "host"}, nil),
		skew: prometheus.NewDesc("rolter_fleet_host_skew", "1 when the host is skewed: kind revision (its box runs an older revision), kind args (its served model card disagrees with the recipe it runs).",
			[]string{"org", "host", "kind"}, nil),
	}
}

// sample records the hosts as just listed, for the gauges.
func (c *Controller) sample(hosts []store.Host) {
	s := make([]hostSample, len(hosts))
	for i := range hosts {
		h := &hosts[i]
		state := h.State
		if h.Drain != nil {
			state = store.HostDraining
		}
		s[i] = hostSample{id: h.ID, org: h.OrgID, state: state, lastFetch: h.LastConfigFetch,
			revSkew: h.AppliedRevision != "" && h.AppliedRevision != Revision(h)}
		if c.cfg.LastFetch != nil {
			if t, ok := c.cfg.LastFetch(h.ID); ok && (h.LastConfigFetch == nil || t.After(*h.LastConfigFetch)) {
				s[i].lastFetch = &t
			}
		}
	}
	c.mu.Lock()
	c.samples = s
	c.mu.Unlock()
}

// forget drops the samples: a replica without the lease exports nothing.
func (c *Controller) forget() {
	c.mu.Lock()
	c.samples = nil
	c.drainsSeen, c.drainsOpen = 0, false
	c.mu.Unlock()
}

func (c *Controller) orgName(id int64) string {
	if c.cfg.OrgName != nil {
		if n := c.cfg.OrgName(id); n != "" {
			return n
		}
	}
	return strconv.FormatInt(id, 10)
}

// collector exports the gauges and the histograms.
type collector struct{ c *Controller }

func (k collector) Describe(ch chan<- *prometheus.Desc) {
	m := k.c.metrics
	ch <- m.hosts
	ch <- m.liveness
	ch <- m.skew
	m.drain.Describe(ch)
	m.outOfRouting.Describe(ch)
}

func (k collector) Collect(ch chan<- prometheus.Metric) {
	c, m := k.c, k.c.metrics
	m.drain.Collect(ch)
	m.outOfRouting.Collect(ch)
	type row struct {
		hostSample
		argSkew bool
	}
	c.mu.Lock()
	rows := make([]row, len(c.samples))
	for i, s := range c.samples {
		rows[i] = row{hostSample: s}
		if hh := c.health[s.id]; hh != nil {
			rows[i].argSkew = len(hh.skew) > 0
		}
	}
	c.mu.Unlock()
	now := c.cfg.Now()
	names := map[int64]string{} // one lookup per org and scrape
	orgName := func(id int64) string {
		n, ok := names[id]
		if !ok {
			n = c.orgName(id)
			names[id] = n
		}
		return n
	}
	counts := map[int64]map[string]int{}
	for _, r := range rows {
		if counts[r.org] == nil {
			counts[r.org] = map[string]int{}
		}
		counts[r.org][r.state]++
		org, host := orgName(r.org), strconv.FormatInt(r.id, 10)
		if r.lastFetch != nil {
			ch <- prometheus.MustNewConstMetric(m.liveness, prometheus.GaugeValue, max(0, now.Sub(*r.lastFetch).Seconds()), org, host)
		}
		ch <- prometheus.MustNewConstMetric(m.skew, prometheus.GaugeValue, b2f(r.revSkew), org, host, "revision")
		ch <- prometheus.MustNewConstMetric(m.skew, prometheus.GaugeValue, b2f(r.argSkew), org, host, "args")
	}
	for org, byState := range counts {
		name := orgName(org)
		for _, st := range liveStates {
			ch <- prometheus.MustNewConstMetric(m.hosts, prometheus.GaugeValue, float64(byState[st]), name, st)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// hostLog is the controller's log with the fields every line about a host
// carries: its org (by name), its id, and its provider's slug once it has
// been registered (a provider is never named by its number).
func (c *Controller) hostLog(h *store.Host) *slog.Logger {
	l := c.log.With("org", c.orgName(h.OrgID), "host", h.ID)
	if h.ProviderSlug != "" {
		l = l.With("provider", h.ProviderSlug)
	}
	return l
}

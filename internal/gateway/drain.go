package gateway

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/rolter/rolter/internal/snapshot"
)

// Draining fleet hosts (issue 18). While a host drains before a restart,
// its provider's settings carry the drain deadline: admit sends it nothing
// new (a route whose targets all drain answers 503 pool_draining with
// Retry-After), requests already in flight run on, and at the deadline
// this replica cuts what still runs to it, counting each cut request.

// errDrainCut is the cause of an attempt cut at its host's drain deadline.
var errDrainCut = errors.New("the fleet host's drain deadline passed before the request finished")

// drainRetryAfter is the Retry-After (seconds) of a 503 pool_draining: a
// restart takes from seconds to minutes, so callers come back soon and
// often rather than once late.
const drainRetryAfter = 5

// drainCut lets this replica cut the attempts in flight to one fleet
// host's provider. Every attempt to a fleet provider watches ctx; the
// timer cancels it at the drain deadline. It is replaced by a fresh one
// when the drain ends, so later requests are not born cut.
type drainCut struct {
	ctx      context.Context
	cancel   context.CancelCauseFunc
	mu       sync.Mutex
	deadline time.Time // of the armed timer; zero when none
	timer    *time.Timer
}

func newDrainCut() *drainCut {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &drainCut{ctx: ctx, cancel: cancel}
}

// disarm stops the timer of a drain that ended before its deadline.
func (d *drainCut) disarm() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer, d.deadline = nil, time.Time{}
	}
}

// drainCutFor returns the cut of fleet provider p, kept across table
// rebuilds, arming or disarming its timer by p's drain deadline; nil for
// providers the fleet does not manage.
func (g *Gateway) drainCutFor(org string, p *snapshot.Provider) *drainCut {
	if p.Settings.PolicyRoute == 0 { // only fleet hosts' providers drain
		return nil
	}
	v, _ := g.drainCuts.LoadOrStore(p.ID, newDrainCut())
	d := v.(*drainCut)
	dl := p.Settings.DrainDeadline
	if dl == nil {
		d.disarm()
		if d.ctx.Err() != nil { // cut during the last drain: start afresh
			d = newDrainCut()
			g.drainCuts.Store(p.ID, d)
		}
		return d
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.deadline.Equal(*dl) || d.ctx.Err() != nil {
		return d
	}
	if d.timer != nil {
		d.timer.Stop()
	}
	id, slug, deadline := p.ID, p.Slug, *dl
	d.deadline = deadline
	d.timer = time.AfterFunc(deadline.Sub(g.clock.Now()), func() { g.cutDrain(org, id, slug, d) })
	return d
}

// cutDrain cancels every attempt still in flight to a drained provider,
// and counts and logs them.
func (g *Gateway) cutDrain(org string, providerID int64, slug string, d *drainCut) {
	n, _ := g.InFlight(providerID)
	if n > 0 {
		g.metrics.drainCuts.WithLabelValues(org, slug).Add(float64(n))
		g.log.Warn("fleet host drain deadline passed: cutting requests still in flight", "provider", slug, "in_flight", n)
	}
	d.cancel(errDrainCut)
}

// watchDrain ties an attempt's context to its provider's drain cut; the
// returned stop must be called when the attempt ends.
func watchDrain(p *providerRT, cancel context.CancelCauseFunc) (stop func() bool) {
	if p.drain == nil {
		return func() bool { return false }
	}
	return context.AfterFunc(p.drain.ctx, func() { cancel(errDrainCut) })
}

// InFlight returns the attempts in flight to a provider's targets on this
// replica, and whether this replica's routing table already sends it
// nothing new (it is draining, or gone from the table).
func (g *Gateway) InFlight(providerID int64) (n int64, routedOut bool) {
	routedOut = true
	if t := g.table.Load(); t != nil {
		if rt := t.providers.At(providerID); rt != nil {
			routedOut = rt.draining
		}
	}
	g.states.Range(func(k, v any) bool {
		if k.(targetID).provider == providerID {
			n += v.(*deployState).stats.InFlight()
		}
		return true
	})
	return n, routedOut
}

// poolDraining is the answer when every target of an address that is not
// down drains.
func poolDraining(route string) *apiError {
	e := newError(http.StatusServiceUnavailable, "pool_draining",
		"every fleet host serving "+quoteModel(route)+" is restarting; retry after a few seconds")
	e.retryAfter = drainRetryAfter
	return e
}

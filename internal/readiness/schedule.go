package readiness

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// Scheduling.
//
// Run keeps one timer for every provider: a heap of next-probe times,
// read by one goroutine, which hands due probes to at most
// maxProbesInFlight short-lived workers. At rest (between probes) the
// cache holds no goroutine and, with an Interval over ProbeIdleTimeout, no
// connection per provider: a fleet of thousands of hosts costs a heap
// entry each, not a goroutine, a timer and an idle keep-alive connection
// each.

// ProbeIdleTimeout is how long a probe connection may stay idle. A probe
// Interval longer than it makes each probe of a self-hosted server close
// its connection with its last request (a hosted API's is kept): the
// inference servers probed drop idle connections sooner anyway
// (uvicorn, which vLLM and SGLang serve with, after 5s), and a connection
// kept per provider would cost a descriptor and two goroutines per host
// at rest. A probe transport's IdleConnTimeout should not exceed it.
const ProbeIdleTimeout = 5 * time.Second

// due is one provider's next probe, at (UnixNano by the cache's clock).
type due struct {
	at int64
	e  *entry
}

// dueHeap orders probes by time, soonest first.
type dueHeap []due

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(due)) }
func (h *dueHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	old[len(old)-1] = due{}
	*h = old[:len(old)-1]
	return d
}

// Run probes each provider every Interval (±10% jitter, independent
// schedules) until ctx is cancelled, following Sync as providers come and
// go. A provider never probed yet is probed at once; one whose readings
// another prober feeds (Feed) is probed only when the readings stop. Run
// returns after all its probes have finished. What is due is judged by
// the cache's clock; Run sleeps on a timer until then, and also looks
// again at each receive from Config.Ticks.
func (c *Cache) Run(ctx context.Context) {
	defer c.closeIdle() // after the probes below
	var wg sync.WaitGroup
	defer wg.Wait()
	finished := make(chan *entry, maxProbesInFlight)
	var q dueHeap
	// An entry's queued flag is set while it is in q or being probed
	// (Run's own: only this goroutine reads or writes it). An entry Sync
	// dropped is let go when it next comes up.
	for _, e := range *c.entries.Load() {
		e.queued = false // a Run before this one may have left it set
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	c.mu.Lock()
	synced := c.synced
	c.mu.Unlock()
	follow := func() {
		now := c.clock.Now()
		for _, e := range *c.entries.Load() {
			if e.queued {
				continue
			}
			e.queued = true
			at := now.UnixNano()
			if e.lastProbe.Load() != 0 {
				at = now.Add(c.jitter()).UnixNano() // already probed (ProbeAll at start-up, or a kept entry)
			}
			heap.Push(&q, due{at, e})
		}
	}
	follow()
	for {
		now := c.clock.Now()
		cur := *c.entries.Load()
		for len(q) > 0 && q[0].at <= now.UnixNano() && len(c.sem) < cap(c.sem) {
			d := heap.Pop(&q).(due)
			e := d.e
			if cur[e.id()] != e {
				continue // Sync dropped it
			}
			// A probe ProbeSoon asked for runs now, fed or not.
			soon := e.soon.Swap(false)
			if until := c.fedUntil(e); !soon && until.After(now) {
				heap.Push(&q, due{until.Add(c.jitter() / 10).UnixNano(), e})
				continue
			}
			select { // a slot was free; only a concurrent ProbeAll can take it first
			case c.sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Go(func() {
				defer func() { <-c.sem }()
				c.probeHeld(ctx, e, soon)
				select {
				case finished <- e:
				case <-ctx.Done():
				}
			})
		}
		var wake <-chan time.Time
		if len(q) > 0 {
			d := time.Duration(q[0].at - c.clock.Now().UnixNano())
			if len(c.sem) == cap(c.sem) {
				// Every slot is busy: a worker of Run's says when it is
				// done; a ProbeAll's does not, so look again soon.
				d = max(d, 20*time.Millisecond)
			}
			timer.Reset(max(0, d))
			wake = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-synced:
			c.mu.Lock()
			synced = c.synced
			c.mu.Unlock()
			follow()
		case <-c.soonWake:
			// Move the probes ProbeSoon asked for to now. O(providers),
			// but only on a refused connection, once per wake-up.
			for i := range q {
				if q[i].e.soon.Load() {
					q[i].at = now.UnixNano()
				}
			}
			heap.Init(&q)
		case e := <-finished:
			if (*c.entries.Load())[e.id()] == e {
				at := c.clock.Now().Add(c.jitter())
				if e.soon.Load() { // asked for while it was being probed
					at = c.clock.Now()
				}
				heap.Push(&q, due{at.UnixNano(), e})
			}
		case <-wake:
		case <-c.cfg.Ticks: // a nil channel never delivers
		}
		timer.Stop() // since Go 1.23 a stopped timer delivers nothing stale
	}
}

// closeIdle closes the idle connections of the cache's own transport
// (Config.Dial), if it has one.
func (c *Cache) closeIdle() {
	if c.probes != nil {
		c.probes.CloseIdleConnections()
	}
}

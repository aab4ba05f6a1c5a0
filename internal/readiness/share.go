package readiness

import (
	"context"
	"crypto/sha256"
	"time"
)

// Shared probes.
//
// Providers that name the same endpoint with the same credential (one
// inference server listed in several orgs, or under several slugs) would
// each send the same requests and read the same answers. Their probes are
// shared: a probe of one records its observation for the others, and a
// provider whose probe comes due while an observation of its endpoint is
// fresh (under half an Interval old) or under way applies that one
// instead of sending its own. Each provider keeps its own state machine,
// schedule and stale marks; what it applies is what its own probe would
// have seen, at most Interval/2 earlier. A probe ProbeSoon asked for is
// always sent (it confirms a refusal the gateway just saw). Providers
// whose endpoint no other provider shares never touch the table.

// shareKey is what providers whose probes are shared have in common.
// The credential is held as its SHA-256, never in the clear: the table
// outlives no provider, but a key in a map is one more copy of the secret
// in memory (and in a heap dump).
type shareKey struct {
	kind, baseURL string
	credential    [sha256.Size]byte
	upstream      bool
}

func shareKeyOf(p Provider) shareKey {
	return shareKey{p.Kind, p.BaseURL, sha256.Sum256([]byte(p.Credential.Reveal())), p.Upstream}
}

// sharedProbe is the latest probe of one shared endpoint.
type sharedProbe struct {
	seq  uint64        // from Cache.shareSeq, when it started
	done chan struct{} // closed when the probe has ended; then the fields below are set
	ok   bool          // the probe ran to its end (its context was not cancelled)
	at   time.Time
	o    observation
}

// endpoint is shareKey with the credential as it is: markShared counts
// the providers of each without hashing every credential. Its map lives
// for the call only, and its keys refer to the providers' own credential
// strings, not to copies.
type endpoint struct {
	kind, baseURL, credential string
	upstream                  bool
}

// markShared sets which of next's entries share their endpoint and keeps
// the shared probes of the endpoints still shared. c.mu is held.
func (c *Cache) markShared(next map[int64]*entry) {
	n := make(map[endpoint]int, len(next))
	for _, e := range next {
		p := e.provider.Load()
		n[endpoint{p.Kind, p.BaseURL, p.Credential.Reveal(), p.Upstream}]++
	}
	still := map[shareKey]bool{} // the shared endpoints, usually few
	for _, e := range next {
		p := e.provider.Load()
		shared := n[endpoint{p.Kind, p.BaseURL, p.Credential.Reveal(), p.Upstream}] > 1
		e.shared.Store(shared)
		if shared {
			still[shareKeyOf(*p)] = true
		}
	}
	c.shareMu.Lock()
	defer c.shareMu.Unlock()
	for k := range c.shared {
		if !still[k] {
			delete(c.shared, k)
		}
	}
}

// observeShared is observe for a provider whose endpoint is shared (see
// above); triggered probes are always sent, and with after > 0 only a
// probe numbered after or later is applied (ProbeAll: one that started
// during the call). It returns the observation and when it was made.
func (c *Cache) observeShared(ctx context.Context, p Provider, triggered bool, after uint64) (observation, time.Time) {
	k := shareKeyOf(p)
	c.shareMu.Lock()
	sp := c.shared[k]
	if sp != nil && !triggered && sp.seq >= after {
		select {
		case <-sp.done:
			if sp.ok && (after > 0 || c.clock.Now().Sub(sp.at) < c.cfg.Interval/2) {
				c.shareMu.Unlock()
				return sp.o, sp.at
			}
		default: // under way: wait for it
			c.shareMu.Unlock()
			select {
			case <-sp.done:
				if sp.ok {
					return sp.o, sp.at
				}
			case <-ctx.Done():
				return observation{}, time.Time{}
			}
			c.shareMu.Lock()
		}
	}
	mine := &sharedProbe{seq: c.shareSeq.Add(1), done: make(chan struct{})}
	c.shared[k] = mine
	c.shareMu.Unlock()
	defer close(mine.done)
	mine.o = c.observe(ctx, p)
	mine.at, mine.ok = c.clock.Now(), ctx.Err() == nil
	return mine.o, mine.at
}

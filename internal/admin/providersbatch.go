package admin

import (
	"context"

	"github.com/rolter/rolter/internal/store"
)

// Batched provider creates (issue 21), as routeBatch batches routes: each
// provider is checked by newProvider, the check CreateProvider makes, and
// the checked ones are written providerBatchSize at a time
// (providersWriter). One provider created through CreateProvider took
// about eight statements; on PostgreSQL, under load, an import of 1,000
// spent seconds on their round trips alone.

// providerBatchSize is how many checked providers a batch writes at once.
const providerBatchSize = 500

// providersWriter is the store's bulk insert of providers, with the
// contract of CreateProvider for each: slugs claimed, providers and their
// keys inserted in one transaction (a savepoint of the caller's), ids and
// times set; a slug taken fails the whole call with the error
// CreateProvider gives. A store without it gets one CreateProvider per
// provider.
type providersWriter interface {
	CreateProviders(ctx context.Context, ps []*store.Provider) error
}

// providerBatch creates providers in one org.
type providerBatch struct {
	s       *Service
	org     *store.Org
	pending []*store.Provider
}

// newProviderBatch starts a batch of creates in org, which must exist.
func (s *Service) newProviderBatch(ctx context.Context, org string) (*providerBatch, error) {
	o, err := s.org(ctx, org)
	if err != nil {
		return nil, err
	}
	return &providerBatch{s: s, org: o}, nil
}

// add checks in as CreateProvider does and queues it.
func (b *providerBatch) add(in ProviderInput) error {
	p, err := b.s.newProvider(b.org, in)
	if err != nil {
		return err
	}
	b.pending = append(b.pending, p)
	return nil
}

// flush writes the pending providers; on failure none of them is written.
// They are pending no more either way.
func (b *providerBatch) flush(ctx context.Context) error {
	ps := b.pending
	b.pending = nil
	if len(ps) == 0 {
		return nil
	}
	var err error
	if w, ok := b.s.st.(providersWriter); ok {
		err = w.CreateProviders(ctx, ps)
	} else {
		err = b.s.st.Tx(ctx, func(st store.Store) error {
			for _, p := range ps {
				if err := st.CreateProvider(ctx, p); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return b.s.committed(ctx, fromStore(err, "provider"))
}

// queuedCreate is an entry of an apply checked and queued in a batch: its
// change, and how to create it on its own should the batch's write fail.
type queuedCreate struct {
	c     Change
	alone func() (string, error)
}

// flushProviders writes the org's queued providers (orgRun.providerBatch).
// A batch the store refuses (a slug that another provider, group or
// deleted one holds, or one created since the apply read the store) is
// created again an entry at a time, so that each gets the outcome, and
// the error, a create of its own would.
func (a *applier) flushProviders(ctx context.Context, o *orgRun) error {
	if o.providerBatch == nil {
		return nil
	}
	queued := o.queued
	o.queued = nil
	if err := o.providerBatch.flush(ctx); err != nil {
		for _, q := range queued {
			if err := a.create(ctx, q.c, q.alone); err != nil {
				return err
			}
		}
		return nil
	}
	for _, q := range queued {
		q.c.Action = ActionCreate
		a.add(q.c)
	}
	return nil
}

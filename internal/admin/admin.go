// Package admin is rolter's management domain: orgs, projects, providers,
// groups, routes, keys, hosts, admin tokens and usage (SPEC §8).
//
// Service holds the rules: every write and read, validation, slug
// handling, secret minting, token scope, and the snapshot rebuild and
// announcement after every committed write. Its failures are domain
// errors (*Error, classed as ErrInvalid, ErrNotFound, ErrConflict or
// ErrUnavailable), never HTTP statuses. Every caller goes through it: the
// admin API (package adminapi), the config and LiteLLM importers and the
// server's bootstrap, so a resource created from YAML passes exactly the
// checks the API applies.
package admin

import (
	"context"
	"log/slog"
	"time"

	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
)

// Service applies admin operations to the store.
type Service struct {
	st   store.Store
	snap *snapshot.Holder
	log  *slog.Logger
	now  func() time.Time
	// ready, when set, adds live readiness to provider views.
	ready Readiness
	// allowLinkLocal lets base_urls name link-local and metadata addresses.
	allowLinkLocal bool
	// publish, when set, announces a committed write to other replicas.
	publish func(context.Context)
	// publishFleet, when set, announces a write to hosts or fleet keys
	// only (no snapshot holds them); publish does when it is not set.
	publishFleet func(context.Context)
	// fleetHealth, when set, adds probe results to host views.
	fleetHealth FleetHealth
	// fleetChanged, when set, tells this replica's fleet endpoints that a
	// host or fleet key changed (they answer from memory).
	fleetChanged func()
	// inTx: the writes are part of a caller's store transaction (Apply),
	// which announces them once, after its commit; changed does nothing.
	inTx bool
	// applying holds a token while an Apply runs: one at a time. Shared
	// by the copies inStore makes.
	applying chan struct{}
	// applyTimeout bounds a transactional Apply (ApplyTimeout).
	applyTimeout time.Duration
}

// inStore returns a copy of s that works on st, a transaction of s's store
// (store.Store.Tx), and leaves announcing its writes to the transaction's
// owner.
func (s *Service) inStore(st store.Store) *Service {
	c := *s
	c.st, c.inTx = st, true
	return &c
}

// SetPublisher sets what announces a committed write to the other replicas
// sharing the store, after the local snapshot is rebuilt.
func (s *Service) SetPublisher(fn func(context.Context)) { s.publish = fn }

// SetFleetPublisher sets what announces a write to fleet hosts or fleet
// keys alone to the other replicas, which then reload their fleet
// endpoints only, not their snapshots.
func (s *Service) SetFleetPublisher(fn func(context.Context)) { s.publishFleet = fn }

// SetFleetChanged sets what tells this replica's fleet endpoints that a
// host or a fleet key changed without a snapshot rebuild; the other
// replicas hear of it from the publisher.
func (s *Service) SetFleetChanged(fn func()) { s.fleetChanged = fn }

// SetClock replaces the service's clock (expiry checks, revocation times),
// for tests.
func (s *Service) SetClock(now func() time.Time) { s.now = now }

// SetApplyTimeout replaces ApplyTimeout for this service, for tests.
func (s *Service) SetApplyTimeout(d time.Duration) { s.applyTimeout = d }

// Logger is the service's logger. The layers over the Service log
// through it, so that one process has one admin log.
func (s *Service) Logger() *slog.Logger { return s.log }

// NewService returns a Service that rebuilds snap after each write. snap
// may be nil in a process that serves no requests (rolter import): writes
// then only run the publisher, and views leave out what the snapshot adds.
// Authorize needs a snapshot: without one, no token is valid.
func NewService(st store.Store, snap *snapshot.Holder, log *slog.Logger) *Service {
	return &Service{st: st, snap: snap, log: log, now: time.Now, applying: make(chan struct{}, 1), applyTimeout: ApplyTimeout}
}

// changedTimeout bounds the snapshot rebuild and the announcement after a
// committed write.
const changedTimeout = 30 * time.Second

// hostsChanged announces a committed write to hosts or fleet keys that
// changes no routing: the fleet endpoints here reload, and the other
// replicas are told (their fleet endpoints reload).
func (s *Service) hostsChanged(ctx context.Context) {
	if s.inTx {
		return
	}
	if s.fleetChanged != nil {
		s.fleetChanged()
	}
	publish := s.publishFleet
	if publish == nil {
		publish = s.publish
	}
	if publish != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), changedTimeout)
		defer cancel()
		publish(ctx)
	}
}

// changed publishes a committed write to the request path. A failed rebuild
// leaves the previous snapshot serving; the write itself has succeeded and
// the next successful rebuild includes it. The write's context is not the
// rebuild's: a client that leaves right after the commit must not leave
// this replica on the old snapshot and the others untold. The fleet
// endpoints are told whether or not the rebuild succeeds (a retired host
// must leave /vllm/config even while the snapshot cannot be rebuilt).
func (s *Service) changed(ctx context.Context) {
	if s.inTx {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), changedTimeout)
	defer cancel()
	if s.snap != nil {
		if err := s.snap.Reload(ctx); err != nil {
			s.log.Error("snapshot rebuild after admin write failed; serving the previous one", "err", err)
		}
	}
	if s.fleetChanged != nil {
		s.fleetChanged()
	}
	if s.publish != nil {
		s.publish(ctx)
	}
}

// committed ends a write: err is the store write's outcome, already a
// domain error (fromStore), and goes back as it is; a write that went in
// is announced (changed) first. The writes end here, so that none can
// answer its caller before the request path has heard of it.
func (s *Service) committed(ctx context.Context, err error) error {
	if err == nil {
		s.changed(ctx)
	}
	return err
}

// Batch runs fn with a Service whose writes are one store transaction,
// committed when fn returns nil (and rolled back when it fails), then
// announced once: the snapshot is rebuilt once for the whole batch, not
// once per write (issue 21). Bulk writers (the LiteLLM importer) use it.
// fn reads through st, the transaction (a SQLite store has one connection,
// which the transaction holds).
func (s *Service) Batch(ctx context.Context, fn func(svc *Service, st store.Store) error) error {
	if s.inTx {
		return fn(s, s.st)
	}
	if err := s.st.Tx(ctx, func(st store.Store) error { return fn(s.inStore(st), st) }); err != nil {
		return err
	}
	s.changed(ctx)
	return nil
}

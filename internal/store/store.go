// Package store is rolter's persistent state: orgs, projects, providers and
// their key pools, routes, virtual keys, admin tokens and usage records.
//
// Store is the one interface the rest of rolter uses; package sqlstore
// implements it on SQLite (the embedded default) and PostgreSQL. The request
// path never calls the store: it reads a snapshot built from Load (see
// package snapshot). Every method takes a context and is safe for concurrent
// use.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rolter/rolter/internal/money"
	"github.com/rolter/rolter/internal/secret"
)

// Errors the store returns; test with errors.Is / errors.As.
var (
	// ErrNotFound: no live row matched.
	ErrNotFound = errors.New("store: not found")
	// ErrUnavailable wraps failures to reach the database at all.
	ErrUnavailable = errors.New("store: unavailable")
	// ErrRejected wraps a write the database refused because of the values
	// it carries (a constraint, a number out of range, text it cannot
	// hold), not because it is unavailable: the same values fail again,
	// while other rows would go in. Unique and foreign key violations are
	// ConflictError and InUseError instead.
	ErrRejected = errors.New("store: rejected")
	// ErrRevoked: the row is revoked and can no longer be changed.
	ErrRevoked = errors.New("store: revoked")
	// ErrNotRevoked: the row must be revoked before it can be deleted.
	ErrNotRevoked = errors.New("store: not revoked")
	// ErrLastAdminToken: revoking the token would leave no live global
	// admin token.
	ErrLastAdminToken = errors.New("store: last live global admin token")
	// ErrWriteConflict wraps a write the database rolled back because a
	// concurrent one got in its way (a deadlock or a serialization
	// failure on PostgreSQL): nothing was written, and the same write can
	// succeed when retried.
	ErrWriteConflict = errors.New("store: write conflict with a concurrent write; retry")
)

// ConflictError reports a unique constraint that a write would break.
type ConflictError struct {
	// What names the constraint in domain words: "org name", "project name",
	// "slug", "route model", "admin token".
	What string
}

func (e *ConflictError) Error() string { return "store: " + e.What + " already exists" }

// SlugHolder is what claims a slug: a provider or a group, and whether it
// is soft-deleted (the slug reserved, nothing routed by it).
type SlugHolder struct {
	Kind    string // "provider" or "group"
	Deleted bool
}

// AllowlistRef is a live virtual key whose allowlist names a slug.
type AllowlistRef struct {
	KeyID   int64
	Name    string
	Project string
	// Entries are the allowlist entries that name the slug.
	Entries []string
	// Revoked: a forced purge removed every entry of the key's allowlist
	// and revoked the key, since an empty allowlist allows every model.
	Revoked bool
}

// AllowlistError refuses a purge while virtual keys' allowlists name the
// slug (design 000 §3: a freed slug is never silently re-pointed).
type AllowlistError struct {
	Slug string
	Keys []AllowlistRef
}

func (e *AllowlistError) Error() string {
	return fmt.Sprintf("store: slug %q is named in the allowlists of %d virtual keys", e.Slug, len(e.Keys))
}

// InUseError reports a delete refused because other rows still refer to the
// row (a project with routes, a provider targeted by routes).
type InUseError struct{ What string }

func (e *InUseError) Error() string { return "store: still referenced by " + e.What }

// Page selects a slice of a list ordered by id: rows with id > After, at most
// Limit of them.
type Page struct {
	Limit int
	After int64
}

// State is everything the request path needs, read in one consistent
// transaction. Soft-deleted providers and revoked keys are included so that
// the snapshot can tell "gone" from "never existed"; the snapshot decides.
type State struct {
	Orgs        []Org
	Projects    []Project
	Providers   []Provider
	Routes      []Route
	Groups      []Group
	VirtualKeys []VirtualKey
	AdminTokens []AdminToken
}

// Store is rolter's persistence. Lookups by name are scoped by the parent's
// id; Get methods return ErrNotFound when nothing matches, writes that break
// a uniqueness rule return *ConflictError, and deletes refused because of
// references return *InUseError. Create methods fill ID and timestamps.
type Store interface {
	// Migrate applies the embedded migrations; Open already does.
	Migrate(ctx context.Context) error
	Ping(ctx context.Context) error
	Close() error
	// Dialect is "sqlite" or "postgres".
	Dialect() string
	// Tx runs fn with a Store whose every method is part of one
	// transaction, committed when fn returns nil and rolled back when it
	// returns an error (which Tx returns as it is) or panics. Methods that
	// write several rows stay atomic inside it. Tx on the Store fn gets
	// nests: it is a savepoint, whose writes alone are undone when its
	// function fails, leaving the outer transaction usable. Load on it
	// reads what the transaction has written so far. The Store fn gets is
	// for fn's goroutine only and dead after fn returns; its Close and
	// Migrate are errors. While the transaction is open, other writers of
	// a SQLite store wait for it.
	Tx(ctx context.Context, fn func(Store) error) error

	CreateOrg(ctx context.Context, o *Org) error
	GetOrg(ctx context.Context, name string) (*Org, error)
	ListOrgs(ctx context.Context, p Page) ([]Org, error)
	UpdateOrg(ctx context.Context, o *Org) error
	DeleteOrg(ctx context.Context, id int64) error

	CreateProject(ctx context.Context, p *Project) error
	GetProject(ctx context.Context, orgID int64, name string) (*Project, error)
	ListProjects(ctx context.Context, orgID int64, p Page) ([]Project, error)
	UpdateProject(ctx context.Context, p *Project) error
	DeleteProject(ctx context.Context, id int64) error

	// SlugTaken reports whether slug is claimed in the org's namespace,
	// including by soft-deleted providers and groups.
	SlugTaken(ctx context.Context, orgID int64, slug string) (bool, error)
	// SlugHolder says what claims slug in the org's namespace; ErrNotFound
	// when nothing does.
	SlugHolder(ctx context.Context, orgID int64, slug string) (SlugHolder, error)
	// CreateProvider claims the slug and inserts the provider and its keys
	// in one transaction.
	CreateProvider(ctx context.Context, p *Provider) error
	// GetProvider returns the provider by slug, soft-deleted or not.
	GetProvider(ctx context.Context, orgID int64, slug string) (*Provider, error)
	ListProviders(ctx context.Context, orgID int64, p Page) ([]Provider, error)
	// UpdateProvider writes every field except keys; a changed Slug moves
	// the provider's claim in the namespace.
	UpdateProvider(ctx context.Context, p *Provider) error
	SoftDeleteProvider(ctx context.Context, id int64, at time.Time) error
	// PurgeProvider removes the provider, its keys and its slug claim. A
	// live virtual key of the org whose allowlist names the slug
	// ("slug/*", "slug/model") refuses it with an *AllowlistError, unless
	// force: then those entries are removed in the same transaction (a
	// key left with none is revoked rather than allowed every model), and
	// the keys changed are returned.
	PurgeProvider(ctx context.Context, id int64, force bool) ([]AllowlistRef, error)
	AddProviderKey(ctx context.Context, k *ProviderKey) error
	DeleteProviderKey(ctx context.Context, providerID, keyID int64) error
	// SetProviderKeyWeight changes a pool key's weight; ErrNotFound when
	// the provider has no such key.
	SetProviderKeyWeight(ctx context.Context, providerID, keyID int64, weight int) error
	// SetProviderKeyRef changes the environment reference recorded with a
	// pool key; ErrNotFound when the provider has no such key.
	SetProviderKeyRef(ctx context.Context, providerID, keyID int64, ref string) error

	// CreateGroup claims the slug and inserts the group and its members in
	// one transaction; a taken slug is a *ConflictError with What "slug".
	CreateGroup(ctx context.Context, g *Group) error
	GetGroup(ctx context.Context, orgID int64, slug string) (*Group, error)
	ListGroups(ctx context.Context, orgID int64, p Page) ([]Group, error)
	// UpdateGroup writes the group and replaces its members; a changed Slug
	// moves the claim in the namespace.
	UpdateGroup(ctx context.Context, g *Group) error
	// SoftDeleteGroup takes the group out of routing and keeps its slug
	// reserved; ErrNotFound when it is already deleted.
	SoftDeleteGroup(ctx context.Context, id int64, at time.Time) error
	// PurgeGroup removes the group, its members and its slug claim, with
	// the allowlist rule of PurgeProvider.
	PurgeGroup(ctx context.Context, id int64, force bool) ([]AllowlistRef, error)

	// CreateRoute inserts the route and its targets in one transaction.
	CreateRoute(ctx context.Context, r *Route) error
	GetRoute(ctx context.Context, projectID int64, model string) (*Route, error)
	ListRoutes(ctx context.Context, projectID int64, p Page) ([]Route, error)
	// FallbackRoutes returns, by id and without their targets, the
	// project's routes that name a fallback or a context fallback and
	// those whose model is one of models (a few names): all that the
	// checks of fallbacks need, since no other route can be on a chain.
	FallbackRoutes(ctx context.Context, projectID int64, models []string) ([]Route, error)
	// UpdateRoute writes the route and replaces its targets.
	UpdateRoute(ctx context.Context, r *Route) error
	DeleteRoute(ctx context.Context, id int64) error

	CreateVirtualKey(ctx context.Context, k *VirtualKey) error
	GetVirtualKey(ctx context.Context, projectID, id int64) (*VirtualKey, error)
	ListVirtualKeys(ctx context.Context, projectID int64, p Page) ([]VirtualKey, error)
	RevokeVirtualKey(ctx context.Context, id int64, at time.Time) error
	// UpdateVirtualKey writes the editable fields of a live key (name,
	// models, limits, expiry; never the secret). A revoked key is
	// ErrRevoked.
	UpdateVirtualKey(ctx context.Context, k *VirtualKey) error
	// DeleteVirtualKey removes a revoked key of the project; a live one is
	// ErrNotRevoked. Usage records keep its id as a plain number.
	DeleteVirtualKey(ctx context.Context, projectID, id int64) error

	// CreateAdminToken inserts t; an empty Source is AdminTokenAPI.
	CreateAdminToken(ctx context.Context, t *AdminToken) error
	// CountAdminTokens counts every admin token ever stored, revoked ones
	// included: zero means first start.
	CountAdminTokens(ctx context.Context) (int, error)
	GetAdminToken(ctx context.Context, id int64) (*AdminToken, error)
	ListAdminTokens(ctx context.Context, p Page) ([]AdminToken, error)
	// RevokeAdminToken revokes a token; revoking twice keeps the first
	// time. Revoking the last live (unrevoked, unexpired at at) global
	// token is ErrLastAdminToken, decided atomically with concurrent
	// revocations.
	RevokeAdminToken(ctx context.Context, id int64, at time.Time) error
	// SetEnvAdminToken makes hash the only live AdminTokenEnv token: other
	// env tokens are revoked at at, and hash is inserted (or, when it was
	// the env token before, made live again). A nil hash revokes every env
	// token. A hash held by a token of another source is a *ConflictError.
	SetEnvAdminToken(ctx context.Context, hash *secret.Hash, at time.Time) error

	// InsertUsage appends recs in one transaction: all or none. IDs are
	// assigned by the store and not reported back.
	InsertUsage(ctx context.Context, recs []UsageRecord) error
	// ListUsage returns the org's records matching f, ordered by id.
	ListUsage(ctx context.Context, f UsageFilter, p Page) ([]UsageRecord, error)
	// SummarizeUsage sums the org's records matching f per distinct value
	// of the groupBy dimensions (Group* constants), in the database, and
	// returns at most limit groups ordered by bucket, then the other
	// dimensions.
	SummarizeUsage(ctx context.Context, f UsageFilter, groupBy []string, limit int) ([]UsageGroup, error)
	// SpentSince sums the cost of the records of virtual key keyID (when
	// not 0) or else of project projectID created at or after since.
	SpentSince(ctx context.Context, keyID, projectID int64, since time.Time) (money.Amount, error)

	// Load reads the whole routing state in one consistent transaction.
	Load(ctx context.Context) (*State, error)

	// CreateHost inserts a host; an address (ip, port) already held by a
	// live host of the org is a *ConflictError with What "host address".
	// check, when set, sees the live hosts of h's pool (same project and
	// model name) inside the transaction, serialised with other writes to
	// the project's hosts; an error from it aborts the insert.
	CreateHost(ctx context.Context, h *Host, check PoolCheck) error
	// CreateHosts inserts hs in one transaction: all of them or none.
	// check, when set, runs once per pool the batch adds to (same org,
	// project and model name), with the pool's live hosts and the batch's
	// hosts joining it, serialised as for CreateHost; an error from it
	// aborts the batch. A failure of one host's insert (an address already
	// held) is an *EntryError naming its index in hs. Batches into one org
	// are serialised whatever their projects, since an address is unique
	// in the org: of two batches sharing an address, the later one fails
	// on it rather than both deadlocking.
	CreateHosts(ctx context.Context, hs []*Host, check PoolJoinCheck) error
	// GetHost returns the org's host with its API key opened.
	GetHost(ctx context.Context, orgID, id int64) (*Host, error)
	// ListHosts pages through the org's hosts, retired ones included.
	ListHosts(ctx context.Context, orgID int64, p Page) ([]Host, error)
	// ListHostsByIP returns the org's live (non-retired) hosts at ip.
	ListHostsByIP(ctx context.Context, orgID int64, ip string) ([]Host, error)
	// ListLiveHosts returns every non-retired host of every org.
	ListLiveHosts(ctx context.Context) ([]Host, error)
	// ListPoolHosts returns the live (non-retired) hosts of one pool: the
	// org's project's hosts serving modelName, in id order.
	ListPoolHosts(ctx context.Context, orgID, projectID int64, modelName string) ([]Host, error)
	// UpdateHost writes port, model name, recipe, notes, auto-apply, the
	// hf token and the drain timeout (not
	// the apply request: see RequestApply); check as for CreateHost.
	UpdateHost(ctx context.Context, h *Host, check PoolCheck) error
	// RequestApply sets the apply request of a live host.
	RequestApply(ctx context.Context, orgID, id int64) error
	// StartDrain sets the apply request of a live host and, in the same
	// transaction, starts its drain: drain_started_at = at, the deadline
	// at + its drain timeout, and its provider's DrainDeadline, so every
	// replica stops routing to it. check, when set, sees the host's pool
	// as for CreateHost (the host itself excluded); an error from it
	// aborts. A drain already running is kept as it is.
	StartDrain(ctx context.Context, orgID, id int64, check PoolCheck, at time.Time) error
	// MarkDrained records that a drain finished (drained_at = at): the box
	// may restart. A host without an active drain is left alone.
	MarkDrained(ctx context.Context, id int64, at time.Time) error
	// TouchHosts sets last_config_fetch of ids to at.
	TouchHosts(ctx context.Context, ids []int64, at time.Time) error
	// RecordConfigFetches sets each host's last_config_fetch to its time,
	// in one transaction. It never moves a host's time back: a later
	// fetch another replica or an earlier call recorded stays. Hosts that
	// are gone are skipped.
	// The fleet endpoints batch liveness through it (fleet.Liveness).
	RecordConfigFetches(ctx context.Context, fetches []ConfigFetch) error
	// RecordHostReports stores a box's report, one entry per host, in one
	// transaction: every entry is written or none. An entry whose host is
	// gone is skipped.
	RecordHostReports(ctx context.Context, entries []HostReportEntry, at time.Time) error
	// RecordHeartbeats sets each host's reported_at to its time, and
	// nothing else, in one transaction: the heartbeats of boxes whose
	// report is unchanged. Like RecordConfigFetches it never moves a
	// host's time back (a report written since stays) and skips hosts
	// that are gone. The fleet endpoints batch them (fleet.Heartbeats).
	RecordHeartbeats(ctx context.Context, beats []Heartbeat) error
	// RegisterHost makes a serving host reachable, in one transaction: it
	// creates (or restores and updates) the host's vllm provider, creates
	// its route if missing, adds the target, sets the state serving and
	// ends a drain. It is idempotent.
	RegisterHost(ctx context.Context, id int64, reg HostRegistration) error
	// DeregisterHost removes the host's targets, takes its provider out of
	// routing (soft delete; the slug stays with the host) and sets state,
	// which is HostDown or HostRetired, in one transaction.
	DeregisterHost(ctx context.Context, id int64, state string) error

	// CreateFleetKey inserts k unless the org already holds maxActive
	// unrevoked keys (a *ConflictError with What "active fleet keys").
	CreateFleetKey(ctx context.Context, k *FleetKey, maxActive int) error
	ListFleetKeys(ctx context.Context, orgID int64, p Page) ([]FleetKey, error)
	// FleetKeyByLookup finds an unrevoked key by the public part of its
	// token.
	FleetKeyByLookup(ctx context.Context, lookup string) (*FleetKey, error)
	RevokeFleetKey(ctx context.Context, orgID, id int64, at time.Time) error
}

// TxLocker is what the Store a transaction hands fn (Store.Tx) may also
// be. LockTx waits for the lock named name, then holds it until the
// transaction ends: transactions that take the same lock run one after
// another, on every replica sharing the store. It fails when ctx ends
// first, and outside a transaction. A store whose writers already wait
// for each other (SQLite: one process, one writer) takes it at once.
type TxLocker interface {
	LockTx(ctx context.Context, name string) error
}

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

	"github.com/rolter/rolter/internal/fleetapi"
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
)

// ConflictError reports a unique constraint that a write would break.
type ConflictError struct {
	// What names the constraint in domain words: "org name", "project name",
	// "slug", "route model", "admin token".
	What string
}

func (e *ConflictError) Error() string { return "store: " + e.What + " already exists" }

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

// Org is the tenant boundary.
type Org struct {
	ID          int64
	Name        string
	Description string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Project groups routes and virtual keys inside an org.
type Project struct {
	ID          int64
	OrgID       int64
	Name        string
	Description string
	Budget      Budget
	// RPMLimit and TPMLimit bound the requests and tokens per minute of all
	// the project's keys together; 0: no limit.
	RPMLimit  int
	TPMLimit  int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Provider is one upstream endpoint with its key pool.
type Provider struct {
	ID             int64
	OrgID          int64
	Slug           string
	Name           string
	Kind           string // one of the Kind* constants
	BaseURL        string
	MetadataSource string   // MetadataConfigured or MetadataUpstream
	ContextLimit   int      // 0: not configured
	Models         []string // configured catalog; empty: unknown
	Settings       ProviderSettings
	Keys           []ProviderKey
	CreatedAt      time.Time
	UpdatedAt      time.Time
	DeletedAt      *time.Time // soft-deleted: slug reserved, out of routing
}

// ProviderSettings are per-provider knobs stored as one JSON document, so
// later features add fields without a migration. Zero values mean "use the
// gateway default".
type ProviderSettings struct {
	FirstByteTimeout Duration `json:"first_byte_timeout,omitempty"`
	IdleTimeout      Duration `json:"idle_timeout,omitempty"`
	// ForwardHeaders are client headers the operator lets through to this
	// provider beside the built-in allowlist; a trailing "*" matches a
	// prefix ("X-Demo-*").
	ForwardHeaders []string `json:"forward_headers,omitempty"`
	// Policy is the provider's own router-owned policy (SPEC §6): every
	// request it serves, on any address, meets the strictest of it and the
	// address's policy.
	Policy Policy `json:"policy,omitzero"`
	// PolicyRoute is the route whose policy the provider also inherits: a
	// fleet host's provider follows its fleet route's policy (set by
	// RegisterHost), so host-N/model is governed like the route. 0: none.
	PolicyRoute int64 `json:"policy_route,omitempty"`
	// Prices are what the provider's tokens cost; nil: unpriced (usage
	// counts tokens, cost stays unknown). Kept here rather than in columns
	// because only the gateway's snapshot reads them: no query filters or
	// sums prices (usage rows carry the computed cost).
	Prices *Prices `json:"prices,omitempty"`
}

// Prices are token prices in the gateway's one currency (USD), per million
// tokens, as exact integers (package money).
type Prices struct {
	Input  money.Price `json:"input"`
	Output money.Price `json:"output"`
}

// Budget caps what a key or a project may spend per UTC calendar period.
// Period "" means no budget; an Amount of 0 with a period blocks every
// priced request.
type Budget struct {
	Amount money.Amount `json:"amount"`
	Period string       `json:"period"` // "day", "week" or "month"
}

// Budget periods.
const (
	PeriodDay   = "day"
	PeriodWeek  = "week"
	PeriodMonth = "month"
)

// ProviderKey is one upstream credential in a provider's pool.
type ProviderKey struct {
	ID         int64
	ProviderID int64
	Secret     secret.Secret // sealed at rest when a master key is set
	Weight     int
	CreatedAt  time.Time
}

// Route maps a public model name in a project to weighted targets.
type Route struct {
	ID        int64
	ProjectID int64
	Model     string
	Strategy  string
	Policy    Policy
	Targets   []Target
	// RPMLimit and TPMLimit bound the requests and tokens per minute sent
	// to the route by every key together; 0: no limit.
	RPMLimit  int
	TPMLimit  int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Target is one provider a route sends traffic to.
type Target struct {
	ID            int64
	ProviderID    int64
	ProviderSlug  string // filled on read
	UpstreamModel string // empty: send the client's model string
	Weight        int
	ContextLimit  int     // 0: the provider's
	Prices        *Prices // nil: the provider's
}

// Policy is the router-owned policy of a route, a group or a provider
// (SPEC §6). Zero values mean "no limit" / "allow".
type Policy struct {
	MaxOutputTokens int    `json:"max_output_tokens,omitempty"`
	Tools           string `json:"tools,omitempty"`
	Media           string `json:"media,omitempty"`
	MaxConcurrency  int    `json:"max_concurrency,omitempty"`
}

// Group is an org-scoped set of providers addressed as "group-slug/model"
// (design 000, addendum). Its slug shares the org's namespace with
// providers. Groups never contain groups.
type Group struct {
	ID       int64
	OrgID    int64
	Slug     string
	Name     string
	Strategy string
	// Policy governs every group-slug/model request, combined with the
	// serving member's own policy.
	Policy    Policy
	Members   []GroupMember
	CreatedAt time.Time
	UpdatedAt time.Time
}

// GroupMember is one provider of a group. ModelMap maps the model a client
// asks for (the right part of "group/model") to the model sent to this
// member; a model not in the map passes through unchanged.
type GroupMember struct {
	ProviderID   int64
	ProviderSlug string // filled on read
	Weight       int
	ModelMap     map[string]string
}

// VirtualKey is a client credential of a project. Only its hash is stored.
type VirtualKey struct {
	ID        int64
	ProjectID int64
	Name      string
	Lookup    string // public part of the token that finds this row
	Hash      secret.Hash
	Models    []string // allowlist; empty: every model
	RPMLimit  int
	TPMLimit  int
	Budget    Budget
	ExpiresAt *time.Time
	RevokedAt *time.Time
	CreatedAt time.Time
}

// AdminToken guards the admin API. Only its hash is stored.
type AdminToken struct {
	ID   int64
	Name string
	Hash secret.Hash
	// OrgID is the one org the token may manage; 0: global. OrgName is
	// filled on read.
	OrgID   int64
	OrgName string
	// Lookup is the public part of a minted token; "" for the env token.
	Lookup string
	// Source is AdminTokenAPI, AdminTokenFirstStart or AdminTokenEnv.
	Source    string
	ExpiresAt *time.Time
	RevokedAt *time.Time
	CreatedAt time.Time
}

// Where an admin token came from.
const (
	AdminTokenAPI        = "api"         // POST /admin/v1/tokens
	AdminTokenFirstStart = "first_start" // generated and printed on first start
	AdminTokenEnv        = "env"         // ROLTER_ADMIN_TOKEN; see SetEnvAdminToken
)

// UsageRecord is one gateway request as accounted (SPEC §4). It copies ids
// and names rather than referencing rows, so records outlive purged
// providers and revoked keys.
type UsageRecord struct {
	ID        int64
	CreatedAt time.Time // request start; zero: the time of insert
	OrgID     int64
	ProjectID int64
	KeyID     int64 // virtual key
	// AddressKind is how the client addressed the model: "route",
	// "provider" or "group".
	AddressKind string
	// Address is the model string the client sent: a route alias or
	// "slug/model".
	Address       string
	Route         string // route model; empty when not addressed by route
	ProviderID    int64  // 0: no provider was reached
	ProviderSlug  string
	UpstreamModel string
	// Status is the HTTP status sent to the client; 499 when the client
	// cancelled.
	Status int
	// Class is the failure class ("upstream_unavailable", "rate_limited",
	// "client_cancelled", ...); empty on success.
	Class    string
	Attempts int
	// Latency and TTFT are stored in whole milliseconds. TTFT is 0 when the
	// request was not streamed or no token arrived.
	Latency          time.Duration
	TTFT             time.Duration
	PromptTokens     int
	CompletionTokens int
	Stream           bool
	// Cost is what the tokens cost at the prices of the target that served
	// them; nil when that target has no price, 0 when no provider was
	// reached.
	Cost *money.Amount
}

// UsageFilter narrows ListUsage and SummarizeUsage. Zero values match
// everything.
type UsageFilter struct {
	OrgID     int64 // required
	ProjectID int64
	KeyID     int64
	// KeyName matches every key of the org (or of ProjectID) with this
	// name, revoked ones included.
	KeyName  string
	Route    string
	Provider string // provider slug
	// Model is the model the client sent (a route name or slug/model).
	Model string
	Since time.Time // created_at >= Since
	Until time.Time // created_at < Until
}

// Usage summary dimensions (SummarizeUsage); at most one of day and hour.
const (
	GroupKey      = "key"
	GroupProject  = "project"
	GroupRoute    = "route"
	GroupProvider = "provider"
	GroupModel    = "model"
	GroupDay      = "day"
	GroupHour     = "hour"
)

// UsageGroup is one row of a usage summary: the grouped dimensions (zero
// when not grouped by) and the sums over the group's records.
type UsageGroup struct {
	KeyID       int64
	KeyName     string // "" when the key row is gone
	ProjectID   int64
	ProjectName string
	Route       string
	Provider    string
	Model       string
	Bucket      time.Time // start of the UTC day or hour
	Requests    int64
	// Tokens of every record, priced or not.
	PromptTokens     int64
	CompletionTokens int64
	// Cost sums the priced records; Unpriced counts records served by a
	// provider without a price, whose tokens have no cost.
	Cost     money.Amount
	Priced   int64
	Unpriced int64
}

// Host states (SPEC §7): pending until the first healthy probe, serving
// while its vLLM answers, down after the failure threshold, retired by an
// operator only.
const (
	HostPending = "pending"
	HostServing = "serving"
	HostDown    = "down"
	HostRetired = "retired"
)

// Host is a GPU box assignment of the vLLM fleet (design 002): the box at
// IP serves ModelName (a route of project ProjectID) on Port, running
// Recipe, and requires APIKey from the gateway.
type Host struct {
	ID        int64
	OrgID     int64
	ProjectID int64
	IP        string
	Port      int
	ModelName string
	APIKey    secret.Secret // sealed at rest like provider keys
	Recipe    fleetapi.Recipe
	Notes     string
	State     string
	AutoApply bool
	// ApplyRequested is the operator's "restart now"; cleared when the box
	// reports the current revision applied.
	ApplyRequested  bool
	AppliedRevision string
	// Applied is the assignment the box last reported running, recorded
	// when it was current; nil before such a report.
	Applied         *AppliedAssignment
	Report          HostReport // the box's last report
	ReportedAt      *time.Time
	LastConfigFetch *time.Time
	// ProviderID is the vllm provider registered for the host; 0 until
	// the first healthy transition. ProviderSlug is filled on read.
	ProviderID   int64
	ProviderSlug string
	CreatedAt    time.Time
	UpdatedAt    time.Time
	RetiredAt    *time.Time
}

// AppliedAssignment is the part of an assignment the fleet controller
// probes and registers: what the box actually runs.
type AppliedAssignment struct {
	Revision string          `json:"revision"`
	Port     int             `json:"port"`
	Recipe   fleetapi.Recipe `json:"recipe"`
}

// HostReport is what a box last said about itself and this assignment.
type HostReport struct {
	Discovered fleetapi.Discovered `json:"discovered"`
	Error      string              `json:"error,omitempty"`
}

// HostReportEntry is one host's part of a box's report.
type HostReportEntry struct {
	HostID int64
	// Applied is the revision the box runs for the host; "" when none.
	Applied string
	Report  HostReport
	// Current is set when the box runs the current revision: it is
	// recorded as the applied assignment and the apply request is cleared.
	Current *AppliedAssignment
}

// HostRegistration is what registering a serving host writes: the provider
// the gateway uses to reach it and the target in its route.
type HostRegistration struct {
	// Port is where the box's vLLM listens; 0: the host's port.
	Port int
	// ServedModel is the model id the box's vLLM answers to; it becomes the
	// target's upstream model and the provider's configured catalog.
	ServedModel string
	// ContextLimit is the recipe's --max-model-len, 0 when unset.
	ContextLimit int
}

// PoolCheck judges a host against the other live hosts of its pool.
type PoolCheck func(pool []Host) error

// FleetKey authenticates GPU boxes on /vllm/config. Only its hash is
// stored.
type FleetKey struct {
	ID        int64
	OrgID     int64
	Name      string
	Lookup    string
	Hash      secret.Hash
	CreatedAt time.Time
	RevokedAt *time.Time
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
	// including by soft-deleted providers.
	SlugTaken(ctx context.Context, orgID int64, slug string) (bool, error)
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
	// PurgeProvider removes the provider, its keys and its slug claim.
	PurgeProvider(ctx context.Context, id int64) error
	AddProviderKey(ctx context.Context, k *ProviderKey) error
	DeleteProviderKey(ctx context.Context, providerID, keyID int64) error

	// CreateGroup claims the slug and inserts the group and its members in
	// one transaction; a taken slug is a *ConflictError with What "slug".
	CreateGroup(ctx context.Context, g *Group) error
	GetGroup(ctx context.Context, orgID int64, slug string) (*Group, error)
	ListGroups(ctx context.Context, orgID int64, p Page) ([]Group, error)
	// UpdateGroup writes the group and replaces its members; a changed Slug
	// moves the claim in the namespace.
	UpdateGroup(ctx context.Context, g *Group) error
	// DeleteGroup removes the group and frees its slug.
	DeleteGroup(ctx context.Context, id int64) error

	// CreateRoute inserts the route and its targets in one transaction.
	CreateRoute(ctx context.Context, r *Route) error
	GetRoute(ctx context.Context, projectID int64, model string) (*Route, error)
	ListRoutes(ctx context.Context, projectID int64, p Page) ([]Route, error)
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
	// GetHost returns the org's host with its API key opened.
	GetHost(ctx context.Context, orgID, id int64) (*Host, error)
	// ListHosts pages through the org's hosts, retired ones included.
	ListHosts(ctx context.Context, orgID int64, p Page) ([]Host, error)
	// ListHostsByIP returns the org's live (non-retired) hosts at ip.
	ListHostsByIP(ctx context.Context, orgID int64, ip string) ([]Host, error)
	// ListLiveHosts returns every non-retired host of every org.
	ListLiveHosts(ctx context.Context) ([]Host, error)
	// UpdateHost writes port, model name, recipe, notes and auto-apply (not
	// the apply request: see RequestApply); check as for CreateHost.
	UpdateHost(ctx context.Context, h *Host, check PoolCheck) error
	// RequestApply sets the apply request of a live host.
	RequestApply(ctx context.Context, orgID, id int64) error
	// TouchHosts sets last_config_fetch of ids to at.
	TouchHosts(ctx context.Context, ids []int64, at time.Time) error
	// RecordHostReports stores a box's report, one entry per host, in one
	// transaction: every entry is written or none. An entry whose host is
	// gone is skipped.
	RecordHostReports(ctx context.Context, entries []HostReportEntry, at time.Time) error
	// RegisterHost makes a serving host reachable, in one transaction: it
	// creates (or restores and updates) the host's vllm provider, creates
	// its route if missing, adds the target, and sets the state serving.
	// It is idempotent.
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

// Duration is a time.Duration that reads and writes as "30s" in JSON.
type Duration time.Duration

func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q (want e.g. \"30s\", \"5m\")", b)
	}
	if v < 0 {
		return fmt.Errorf("duration %q is negative", b)
	}
	*d = Duration(v)
	return nil
}

package store

import (
	"fmt"
	"time"

	"github.com/rolter/rolter/internal/money"
	"github.com/rolter/rolter/internal/secret"
)

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
	// DrainDeadline is set on a fleet host's provider while the host
	// drains before a restart (StartDrain; RegisterHost clears it): the
	// request path sends it nothing new and cuts what still runs at the
	// deadline. nil: not draining.
	DrainDeadline *time.Time `json:"drain_deadline,omitempty"`
	// Prices are what the provider's tokens cost; nil: unpriced (usage
	// counts tokens, cost stays unknown). Kept here rather than in columns
	// because only the gateway's snapshot reads them: no query filters or
	// sums prices (usage rows carry the computed cost).
	Prices *Prices `json:"prices,omitempty"`
	// Import records where `rolter import` took the provider from; nil
	// for a provider it did not create. Only the importer reads it.
	Import *ProviderImport `json:"import,omitempty"`
}

// ProviderImport is the import identity of a provider that `rolter
// import` created: a re-run of the import finds the provider by it however
// its base_url or key pool were edited since, and changes only what the
// imported file changed (package litellm, docs/import.md).
type ProviderImport struct {
	// IDs are the import identities of the file entries the provider
	// serves ("litellm:" and a hex digest; no secret goes into them).
	IDs []string `json:"ids"`
	// Name, Kind and BaseURL are what the import last wrote. A field that
	// differs from them now was edited since, and a re-run leaves it
	// unless the file changed it too.
	Name    string `json:"name,omitempty"`
	Kind    string `json:"kind,omitempty"`
	BaseURL string `json:"base_url,omitempty"`
	// KeyID is the pool key the import last added; 0: none. A re-run
	// replaces or removes only this key, never one added by hand.
	KeyID int64 `json:"key_id,omitempty"`
}

// Prices are token prices in the gateway's one currency (USD), per million
// tokens, as exact integers (package money).
type Prices struct {
	Input  money.Price `json:"input"`
	Output money.Price `json:"output"`
}

// ProviderKey is one upstream credential in a provider's pool.
type ProviderKey struct {
	ID         int64
	ProviderID int64
	Secret     secret.Secret // sealed at rest when a master key is set
	Weight     int
	// Ref names where the secret came from: the environment variable of
	// a declarative config file (rolter apply) that holds it, so that an
	// export names it again; "" when unknown. Never the secret.
	Ref       string
	CreatedAt time.Time
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
	RPMLimit int
	TPMLimit int
	// Fallbacks are other routes of the same project, by model, tried in
	// order when every attempt on this route failed before the first byte
	// with a retryable class (issue 19). The admin service refuses cycles
	// and chains deeper than MaxFallbackDepth.
	Fallbacks []string
	// ContextFallback is the route, by model, that a request too long for
	// this route's pool context is sent to instead; "": none.
	ContextFallback string
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// MaxFallbackDepth bounds a chain of fallback routes (fallbacks and
// context fallbacks together): a route, its fallback, that one's
// fallback, and one more.
const MaxFallbackDepth = 3

// Target is one provider a route sends traffic to.
type Target struct {
	ID            int64
	ProviderID    int64
	ProviderSlug  string // filled on read
	UpstreamModel string // empty: send the client's model string
	Weight        int
	// Priority is the target's tier in its route: lower is preferred, and
	// a tier is used only when every better one is unroutable or spent.
	Priority     int
	ContextLimit int     // 0: the provider's
	Prices       *Prices // nil: the provider's
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
	// DeletedAt is set on a soft-deleted group: out of routing, its slug
	// still reserved until the group is purged (design 000 §3).
	DeletedAt *time.Time
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

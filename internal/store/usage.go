package store

import (
	"time"

	"github.com/rolter/rolter/internal/money"
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
	// Tier is the priority of the route target that served the request
	// (0 when none did or the address is not a route).
	Tier int
	// Fallback is the fallback (or context fallback) route that served
	// the request instead of Route; "" when Route itself did.
	Fallback string
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

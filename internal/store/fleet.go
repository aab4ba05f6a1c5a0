package store

import (
	"fmt"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/secret"
)

// Host states (SPEC §7): pending until the first healthy probe, serving
// while its vLLM answers, down after the failure threshold, retired by an
// operator only.
const (
	HostPending = "pending"
	HostServing = "serving"
	HostDown    = "down"
	HostRetired = "retired"
	// HostDraining is shown, never stored: a host whose Drain is active.
	// Its state column keeps serving (or down), and the request path sends
	// it nothing new.
	HostDraining = "draining"
)

// DefaultDrainTimeout bounds a drain when a host sets none.
const DefaultDrainTimeout = 120 * time.Second

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
	// HFToken is the credential of an hf source (issue 18), zero when
	// none: sealed at rest, sent only in the host's /vllm/config.
	HFToken   secret.Secret
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
	// DrainTimeout bounds a drain before a restart (default 120s,
	// DefaultDrainTimeout): in-flight requests still running then are cut.
	DrainTimeout time.Duration
	// Drain is the restart drain under way; nil when none.
	Drain     *HostDrain
	CreatedAt time.Time
	UpdatedAt time.Time
	RetiredAt *time.Time
}

// HostDrain is a drain before a restart (issue 18). While it is active the
// host's provider is out of routing on every replica (its settings carry
// the deadline); the box may restart once DrainedAt is set; it ends when
// probes show the new assignment serving (RegisterHost clears it).
type HostDrain struct {
	StartedAt time.Time
	Deadline  time.Time
	// DrainedAt is when the in-flight requests finished or the deadline
	// passed; nil while requests may still be running.
	DrainedAt *time.Time
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
	// Fit, GPUs and KVCache are the assignment's fit check, placement and
	// kv-cache calibration (issue 18); absent from older agents.
	Fit     string            `json:"fit,omitempty"`
	GPUs    []int             `json:"gpus,omitempty"`
	KVCache *fleetapi.KVCache `json:"kv_cache,omitempty"`
	// Download is the progress of the weights the assignment waits for.
	Download *fleetapi.Download `json:"download,omitempty"`
}

// ConfigFetch is one host's latest GET /vllm/config, for
// RecordConfigFetches.
type ConfigFetch struct {
	HostID int64
	At     time.Time
}

// Heartbeat is one host's latest unchanged report, for RecordHeartbeats.
type Heartbeat struct {
	HostID int64
	At     time.Time
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

// PoolJoinCheck judges the hosts a batch adds to one pool (joining, in
// the batch's order) against the live hosts already in it (pool).
type PoolJoinCheck func(pool []Host, joining []*Host) error

// EntryError is the failure of one host of a batch (Store.CreateHosts):
// Index is its position in the batch.
type EntryError struct {
	Index int
	Err   error
}

func (e *EntryError) Error() string { return fmt.Sprintf("store: batch entry %d: %v", e.Index, e.Err) }

func (e *EntryError) Unwrap() error { return e.Err }

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

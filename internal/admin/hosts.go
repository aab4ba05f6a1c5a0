package admin

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/fleet"
	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/netguard"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// Codes of the fleet endpoints.
const (
	CodePoolContract   = "pool_contract_mismatch"
	CodeImmutableField = "immutable_field"
	CodeHostRetired    = "host_retired"
	CodeFleetKeyLimit  = "fleet_key_limit"
	// CodeWouldDrainPool refuses an apply that would take the last
	// serving host of a pool of several out of routing (force overrides).
	CodeWouldDrainPool = "would_drain_pool"
)

// Bounds of a host's drain_timeout.
const (
	minDrainTimeout = time.Second
	maxDrainTimeout = time.Hour
)

// MaxActiveFleetKeys is how many unrevoked fleet keys an org may hold: two,
// so a key can be rotated without a window where boxes are refused.
const MaxActiveFleetKeys = 2

// HostInput creates a host.
type HostInput struct {
	IP        string          `json:"ip"`
	Port      int             `json:"port"`
	Project   string          `json:"project,omitempty"` // default "default"
	ModelName string          `json:"model_name"`
	Recipe    fleetapi.Recipe `json:"recipe"`
	Notes     string          `json:"notes,omitempty"`
	AutoApply bool            `json:"auto_apply,omitempty"`
	// DrainTimeout bounds the drain before a restart (default 120s).
	DrainTimeout *store.Duration `json:"drain_timeout,omitempty"`
	// HFToken is the credential of an hf source, write-only: stored
	// sealed, sent only in the host's /vllm/config; views show
	// hf_token_set.
	HFToken *secret.Secret `json:"hf_token,omitempty"`
}

// HostPatch changes a host. ip, project and model_name are its identity:
// changing them means retiring the host and adding a new one.
type HostPatch struct {
	IP        *string          `json:"ip,omitempty"`
	Project   *string          `json:"project,omitempty"`
	ModelName *string          `json:"model_name,omitempty"`
	Port      *int             `json:"port,omitempty"`
	Recipe    *fleetapi.Recipe `json:"recipe,omitempty"`
	Notes     *string          `json:"notes,omitempty"`
	AutoApply *bool            `json:"auto_apply,omitempty"`
	// DrainTimeout bounds the drain before a restart.
	DrainTimeout *store.Duration `json:"drain_timeout,omitempty"`
	// HFToken sets (or, "", clears) the hf source's credential.
	HFToken *secret.Secret `json:"hf_token,omitempty"`
}

// Liveness is the age of a host's last config fetch with its colour class
// (design 002): green under an hour, red over a week, amber between, never
// when the box has not fetched yet.
type Liveness struct {
	AgeSeconds *int64 `json:"age_seconds"`
	Class      string `json:"class"`
}

// HostView is a host as the API shows it. APIKey is set only in the create
// response.
type HostView struct {
	ID        int64           `json:"id"`
	IP        string          `json:"ip"`
	Port      int             `json:"port"`
	Project   string          `json:"project"`
	ModelName string          `json:"model_name"`
	Recipe    fleetapi.Recipe `json:"recipe"`
	Notes     string          `json:"notes"`
	// State is pending, serving, down or retired, or draining while a
	// restart drain runs (Drain says how far it is).
	State        string         `json:"state"`
	AutoApply    bool           `json:"auto_apply"`
	DrainTimeout store.Duration `json:"drain_timeout"`
	Drain        *HostDrain     `json:"drain,omitempty"`
	APIKey       string         `json:"api_key,omitempty"`
	// HFTokenSet says the host holds an hf token; the token itself is
	// never shown.
	HFTokenSet bool `json:"hf_token_set"`
	// Provider is the slug of the vllm provider the fleet registered for
	// the host (addressable as "host-N/model" while it serves); empty
	// until its first healthy probe.
	Provider string `json:"provider,omitempty"`
	// Revision is the current assignment's; AppliedRevision is what the
	// box last reported running. Skew (= RestartPending) is set when the
	// box runs an older revision.
	Revision        string `json:"revision"`
	AppliedRevision string `json:"applied_revision"`
	Skew            bool   `json:"skew"`
	RestartPending  bool   `json:"restart_pending"`
	ApplyRequested  bool   `json:"apply_requested"`
	// PendingChanges lists, under skew, the fields the restart would
	// change; absent when the box's assignment was never recorded.
	PendingChanges []HostChange `json:"pending_changes,omitempty"`
	// Probe is the fleet controller's latest view of the host, on the
	// replica that runs the controller: why a host stays pending or went
	// down.
	Probe *HostProbe `json:"probe,omitempty"`
	// ServedSkew lists, on the replica that runs the controller, how what
	// the box serves (its /v1/models card) differs from the recipe it
	// runs: a different served name keeps it out of routing (fatal), a
	// different max_model_len is reported only. Absent when they agree.
	ServedSkew      []fleet.Skew         `json:"served_skew,omitempty"`
	LastConfigFetch *time.Time           `json:"last_config_fetch"`
	Liveness        Liveness             `json:"liveness"`
	Discovered      *fleetapi.Discovered `json:"discovered,omitempty"`
	ReportError     string               `json:"report_error,omitempty"`
	// Download is the progress of the weights the box is fetching for
	// the host, as of its last report.
	Download *fleetapi.Download `json:"download,omitempty"`
	// Fit is "checked" when the box placed the host's vLLM against its
	// GPUs and other assignments, "unchecked" when it could not (no
	// nvidia-smi); GPUs are the GPU indexes it was given. KVCache is the
	// calibration of a kv_cache: auto recipe: the conservative launch's
	// figure and the --kv-cache-memory it was relaunched with.
	Fit        string            `json:"fit,omitempty"`
	GPUs       []int             `json:"gpus,omitempty"`
	KVCache    *fleetapi.KVCache `json:"kv_cache,omitempty"`
	ReportedAt *time.Time        `json:"reported_at,omitempty"`
	CreatedAt  time.Time         `json:"created_at"`
	UpdatedAt  time.Time         `json:"updated_at"`
	RetiredAt  *time.Time        `json:"retired_at,omitempty"`
}

// HostDrain is a restart drain under way: the host is out of routing
// since StartedAt; DrainedAt is set once its in-flight requests finished
// (or Deadline passed) and the box may restart. It ends when probes show
// the new revision serving.
type HostDrain struct {
	StartedAt time.Time  `json:"started_at"`
	Deadline  time.Time  `json:"deadline"`
	DrainedAt *time.Time `json:"drained_at,omitempty"`
}

// HostProbe is the controller's in-memory health of a host.
type HostProbe struct {
	ConsecutiveOK       int    `json:"consecutive_ok"`
	ConsecutiveFailures int    `json:"consecutive_failures"`
	LastError           string `json:"last_error,omitempty"`
}

// FleetHealth is what the fleet controller knows of a host's probes.
type FleetHealth interface {
	Health(id int64) (ok, fail int, lastErr string, known bool)
}

// FleetSkew is what the fleet controller's probes found a box serving
// other than its recipe says; a FleetHealth that implements it adds that
// to host views (served_skew).
type FleetSkew interface {
	Skew(id int64) []fleet.Skew
}

// SetFleetHealth adds the controller's probe results to host views.
func (s *Service) SetFleetHealth(h FleetHealth) { s.fleetHealth = h }

func liveness(last *time.Time, now time.Time) Liveness {
	if last == nil {
		return Liveness{Class: "never"}
	}
	age := now.Sub(*last)
	secs := int64(age / time.Second)
	l := Liveness{AgeSeconds: &secs, Class: "amber"}
	switch {
	case age < time.Hour:
		l.Class = "green"
	case age > 7*24*time.Hour:
		l.Class = "red"
	}
	return l
}

func (s *Service) hostView(h *store.Host, project string) HostView {
	rev := fleet.Revision(h)
	skew := h.AppliedRevision != "" && h.AppliedRevision != rev
	v := HostView{ID: h.ID, IP: h.IP, Port: h.Port, Project: project, ModelName: h.ModelName, Recipe: h.Recipe,
		Notes: h.Notes, State: h.State, AutoApply: h.AutoApply, Provider: h.ProviderSlug, Revision: rev, AppliedRevision: h.AppliedRevision,
		Skew: skew, RestartPending: skew, ApplyRequested: h.ApplyRequested, LastConfigFetch: h.LastConfigFetch,
		Liveness: liveness(h.LastConfigFetch, s.now()), ReportError: h.Report.Error, ReportedAt: h.ReportedAt,
		Fit: h.Report.Fit, GPUs: h.Report.GPUs, KVCache: h.Report.KVCache,
		CreatedAt: h.CreatedAt, UpdatedAt: h.UpdatedAt, RetiredAt: h.RetiredAt, PendingChanges: hostChanges(h, rev)}
	if h.ReportedAt != nil {
		d := h.Report.Discovered
		v.Discovered = &d
		v.Download = h.Report.Download
	}
	v.DrainTimeout = store.Duration(h.DrainTimeout)
	v.HFTokenSet = !h.HFToken.IsZero()
	if d := h.Drain; d != nil && h.State != store.HostRetired {
		v.State = store.HostDraining
		v.Drain = &HostDrain{StartedAt: d.StartedAt, Deadline: d.Deadline, DrainedAt: d.DrainedAt}
	}
	if s.fleetHealth != nil {
		if ok, fail, lastErr, known := s.fleetHealth.Health(h.ID); known {
			v.Probe = &HostProbe{ConsecutiveOK: ok, ConsecutiveFailures: fail, LastError: lastErr}
		}
		if sk, ok := s.fleetHealth.(FleetSkew); ok {
			v.ServedSkew = sk.Skew(h.ID)
		}
	}
	return v
}

// projectName finds a project's name by id in the snapshot, for views.
func (s *Service) projectName(org string, id int64) string {
	if s.snap == nil {
		return strconv.FormatInt(id, 10)
	}
	if snap := s.snap.Current(); snap != nil {
		if o := snap.Org(org); o != nil {
			for name, pj := range o.Projects.All() {
				if pj.ID == id {
					return name
				}
			}
		}
	}
	return strconv.FormatInt(id, 10)
}

// checkHostAddress validates ip and port and returns the canonical IP.
func (s *Service) checkHostAddress(fe fieldErrors, ip string, port int) string {
	addr, err := netip.ParseAddr(strings.TrimSpace(ip))
	switch {
	case ip == "":
		fe.add("ip", "is required: the box's address as the gateway sees it")
	case err != nil || addr.Zone() != "":
		fe.add("ip", "must be an IPv4 or IPv6 address")
	case addr.IsUnspecified() || addr.IsMulticast():
		fe.add("ip", "must be a unicast address of the box")
	case netguard.Refused(addr) && !s.allowLinkLocal:
		fe.add("ip", "link-local and cloud metadata addresses are refused (see --allow-link-local-upstreams)")
	}
	if port < 1 || port > 65535 {
		fe.add("port", "must be 1-65535")
	}
	if err != nil {
		return ip
	}
	return addr.Unmap().String()
}

// checkHFToken checks an hf token against the recipe it goes with: it
// applies to hf sources only and is one printable token.
func checkHFToken(fe fieldErrors, tok secret.Secret, r fleetapi.Recipe) {
	if tok.IsZero() {
		return
	}
	if r.VLLM == nil || r.VLLM.Source.Kind != fleetapi.SourceHF {
		fe.add("hf_token", "applies only to a recipe whose source kind is hf; send \"\" to clear it")
		return
	}
	v := tok.Reveal()
	if len(v) > 1024 {
		fe.add("hf_token", "must be at most 1024 characters")
		return
	}
	for _, c := range v {
		if c <= ' ' || c == 0x7f {
			fe.add("hf_token", "must not contain spaces or control characters")
			return
		}
	}
}

func checkRecipe(fe fieldErrors, r fleetapi.Recipe) {
	for f, msg := range fleet.ValidateRecipe(r) {
		fe.add(f, "%s", msg)
	}
}

// poolCheck refuses a recipe that breaks the contract of the pool it joins:
// every live host with the same model name in the same project must agree
// on the caller-visible parameters (ErrConflict naming the parameter). The
// store runs it inside the write's transaction.
func poolCheck(h *store.Host) store.PoolCheck {
	return func(pool []store.Host) error {
		for _, o := range pool {
			if o.Recipe.VLLM == nil {
				continue
			}
			if name, theirs, ours, differ := fleet.ContractDiff(o.Recipe.VLLM, h.Recipe.VLLM); differ {
				return contractError(h, name, theirs, ours, "host "+strconv.FormatInt(o.ID, 10))
			}
		}
		return nil
	}
}

// contractError is the refusal of h, whose recipe's caller-visible
// parameter name differs from other's (a host of the pool, or an earlier
// entry of the same batch).
func contractError(h *store.Host, name, theirs, ours, other string) *Error {
	return &Error{Kind: ErrConflict, Code: CodePoolContract,
		Message: fmt.Sprintf("%s differs from %s serving %s: it has %s, this recipe has %s; hosts sharing a model_name must agree on caller-visible parameters (tuning such as --gpu-memory-utilization may differ)",
			name, other, quote(h.ModelName), theirs, ours),
		Fields: map[string]string{"recipe.vllm": name + " differs from " + other}}
}

// CreateHost records an assignment and mints its upstream API key. No
// route target exists until the fleet controller sees the box serving.
func (s *Service) CreateHost(ctx context.Context, org string, in HostInput) (HostView, error) {
	views, _, err := s.createHosts(ctx, org, []HostInput{in}, batchLabel)
	if err != nil {
		return HostView{}, err
	}
	return views[0], nil
}

func (s *Service) host(ctx context.Context, org, id string) (*store.Org, *store.Host, error) {
	o, err := s.org(ctx, org)
	if err != nil {
		return nil, nil, err
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return nil, nil, notFound("host %s not found", quote(id))
	}
	h, err := s.st.GetHost(ctx, o.ID, n)
	if err != nil {
		return nil, nil, fromStore(err, "host "+quote(id))
	}
	return o, h, nil
}

// PatchHost changes port, recipe, notes or auto_apply. A changed port or
// recipe is a new revision: the box restarts when applied.
func (s *Service) PatchHost(ctx context.Context, org, id string, in HostPatch) (HostView, error) {
	_, h, err := s.host(ctx, org, id)
	if err != nil {
		return HostView{}, err
	}
	fe := fieldErrors{}
	if in.IP != nil {
		fe.add("ip", "cannot change: retire this host and add one at the new address")
	}
	if in.Project != nil {
		fe.add("project", "cannot change: retire this host and add a new one")
	}
	if in.ModelName != nil {
		fe.add("model_name", "cannot change: retire this host and add a new one")
	}
	if len(fe) > 0 {
		return HostView{}, &Error{Kind: ErrInvalid, Code: CodeImmutableField, Message: "a host's ip, project and model_name are its identity; see fields", Fields: fe}
	}
	if h.State == store.HostRetired {
		return HostView{}, &Error{Kind: ErrConflict, Code: CodeHostRetired, Message: fmt.Sprintf("host %d is retired; add a new host instead", h.ID)}
	}
	if in.Port != nil {
		h.Port = *in.Port
		s.checkHostAddress(fe, h.IP, h.Port)
	}
	if in.Recipe != nil {
		h.Recipe = *in.Recipe
		checkRecipe(fe, h.Recipe)
	}
	if in.Notes != nil {
		h.Notes = *in.Notes
		if len(h.Notes) > 4096 {
			fe.add("notes", "must be at most 4096 characters")
		}
	}
	if in.AutoApply != nil {
		h.AutoApply = *in.AutoApply
	}
	h.DrainTimeout = checkDrainTimeout(fe, in.DrainTimeout, h.DrainTimeout)
	if in.HFToken != nil {
		h.HFToken = *in.HFToken
	}
	if in.HFToken != nil || in.Recipe != nil {
		checkHFToken(fe, h.HFToken, h.Recipe)
	}
	if err := fe.err(); err != nil {
		return HostView{}, err
	}
	var check store.PoolCheck
	if in.Recipe != nil {
		check = poolCheck(h)
		if err := s.checkRecipeTargets(ctx, h); err != nil {
			return HostView{}, err
		}
	}
	if err := s.st.UpdateHost(ctx, h, check); err != nil {
		return HostView{}, fromStore(err, "host")
	}
	s.hostsChanged(ctx)
	return s.hostView(h, s.projectName(org, h.ProjectID)), nil
}

// RetireHost deregisters the host and keeps its record with state retired.
// Nothing retires a host but this call.
func (s *Service) RetireHost(ctx context.Context, org, id string) (HostView, error) {
	o, h, err := s.host(ctx, org, id)
	if err != nil {
		return HostView{}, err
	}
	if h.State != store.HostRetired {
		if err := s.st.DeregisterHost(ctx, h.ID, store.HostRetired); err != nil {
			return HostView{}, fromStore(err, "host")
		}
		s.changed(ctx)
		s.log.Info("fleet host retired", "org", org, "host", h.ID, "ip", h.IP, "port", h.Port)
		if h, err = s.st.GetHost(ctx, o.ID, h.ID); err != nil {
			return HostView{}, fromStore(err, "host")
		}
	}
	return s.hostView(h, s.projectName(org, h.ProjectID)), nil
}

// checkDrainTimeout returns the drain timeout in (def when absent).
func checkDrainTimeout(fe fieldErrors, in *store.Duration, def time.Duration) time.Duration {
	if in == nil {
		return def
	}
	d := time.Duration(*in)
	if d < minDrainTimeout || d > maxDrainTimeout || d%time.Second != 0 {
		fe.add("drain_timeout", "must be whole seconds from %s to %s, e.g. \"120s\"", minDrainTimeout, maxDrainTimeout)
	}
	return d
}

// ApplyHost asks the box to restart onto the current revision. A routed
// host whose box runs another revision drains first: it leaves routing at
// once, and the box is told to restart when its in-flight requests
// finished or its drain_timeout passed. Draining the last serving host of
// a pool of several is refused (409 would_drain_pool) unless force.
func (s *Service) ApplyHost(ctx context.Context, org, id string, force bool) (HostView, error) {
	_, h, err := s.host(ctx, org, id)
	if err != nil {
		return HostView{}, err
	}
	if h.State == store.HostRetired {
		return HostView{}, &Error{Kind: ErrConflict, Code: CodeHostRetired, Message: fmt.Sprintf("host %d is retired", h.ID)}
	}
	if fleet.RestartHeld(h) {
		var check store.PoolCheck
		if !force {
			check = fleet.DrainCheck(h)
		}
		if err := s.st.StartDrain(ctx, h.OrgID, h.ID, check, s.now()); err != nil {
			if errors.Is(err, fleet.ErrWouldDrainPool) {
				return HostView{}, &Error{Kind: ErrConflict, Code: CodeWouldDrainPool,
					Message: fmt.Sprintf("host %d is the last host of the pool %s still serving; applying now would leave callers with none. Apply after the others serve again (a rolling apply), or pass force: true (CLI --all-at-once) to restart anyway",
						h.ID, quote(h.ModelName))}
			}
			return HostView{}, fromStore(err, "host")
		}
		s.changed(ctx) // every replica stops routing to it now
		s.log.Info("fleet host draining before its restart", "org", org, "host", h.ID, "model_name", h.ModelName, "force", force)
	} else if err := s.st.RequestApply(ctx, h.OrgID, h.ID); err != nil {
		return HostView{}, fromStore(err, "host")
	} else {
		s.hostsChanged(ctx)
	}
	if h, err = s.st.GetHost(ctx, h.OrgID, h.ID); err != nil {
		return HostView{}, fromStore(err, "host")
	}
	return s.hostView(h, s.projectName(org, h.ProjectID)), nil
}

// FleetKeyInput creates a fleet key; the secret is generated.
type FleetKeyInput struct {
	Name string `json:"name"`
}

// FleetKeyView is a fleet key as the API shows it; Secret only on create.
type FleetKeyView struct {
	ID        int64      `json:"id"`
	Name      string     `json:"name"`
	Secret    string     `json:"secret,omitempty"`
	Prefix    string     `json:"prefix"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

func fleetKeyView(k store.FleetKey) FleetKeyView {
	return FleetKeyView{ID: k.ID, Name: k.Name, Prefix: secret.PrefixFleetKey + k.Lookup, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
}

// CreateFleetKey mints a fleet key. An org holds at most two unrevoked keys:
// mint the new one, roll it into the box template, revoke the old one.
func (s *Service) CreateFleetKey(ctx context.Context, org string, in FleetKeyInput) (FleetKeyView, error) {
	o, err := s.org(ctx, org)
	if err != nil {
		return FleetKeyView{}, err
	}
	fe := fieldErrors{}
	if strings.TrimSpace(in.Name) == "" || len(in.Name) > 200 {
		fe.add("name", "is required (1-200 characters)")
	}
	if err := fe.err(); err != nil {
		return FleetKeyView{}, err
	}
	tok, lookup := secret.Mint(secret.PrefixFleetKey)
	k := &store.FleetKey{OrgID: o.ID, Name: in.Name, Lookup: lookup, Hash: secret.HashOf(tok.Reveal())}
	if err := s.st.CreateFleetKey(ctx, k, MaxActiveFleetKeys); err != nil {
		var ce *store.ConflictError
		if errors.As(err, &ce) && ce.What == "active fleet keys" {
			return FleetKeyView{}, &Error{Kind: ErrConflict, Code: CodeFleetKeyLimit,
				Message: fmt.Sprintf("org %s already has %d active fleet keys; revoke one first (DELETE .../fleet-keys/{id})", quote(org), MaxActiveFleetKeys)}
		}
		return FleetKeyView{}, fromStore(err, "fleet key")
	}
	v := fleetKeyView(*k)
	v.Secret = tok.Reveal()
	return v, nil
}

// RevokeFleetKey revokes a fleet key; the record stays with revoked_at.
// The fleet endpoints keep the keys they have seen in memory: they are
// told, here and on the other replicas, and forget them.
func (s *Service) RevokeFleetKey(ctx context.Context, org, id string) error {
	o, err := s.org(ctx, org)
	if err != nil {
		return err
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return notFound("fleet key %s not found", quote(id))
	}
	if err := s.st.RevokeFleetKey(ctx, o.ID, n, s.now()); err != nil {
		return fromStore(err, "fleet key "+quote(id))
	}
	s.hostsChanged(ctx)
	s.log.Info("fleet key revoked", "org", o.Name, "fleet_key", n)
	return nil
}

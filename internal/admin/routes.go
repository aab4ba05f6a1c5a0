package admin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/rolter/rolter/internal/store"
)

// Balancing strategies (SPEC §4); weighted is the default.
var strategies = []string{"weighted", "round_robin", "least_busy", "latency"}

// RouteInput creates a route.
type RouteInput struct {
	Model    string        `json:"model"`
	Strategy string        `json:"strategy,omitempty"`
	Targets  []TargetInput `json:"targets"`
	Policy   store.Policy  `json:"policy"`
	// RPMLimit and TPMLimit bound the route for every key together (0: no
	// limit); they apply to requests addressed by the route's name.
	RPMLimit int `json:"rpm_limit,omitempty"`
	TPMLimit int `json:"tpm_limit,omitempty"`
	// Fallbacks are other routes of the project, by name, tried in order
	// when every attempt on this route failed before the first byte
	// (issue 19); ContextFallback takes requests too long for this
	// route's pool context.
	Fallbacks       []string `json:"fallbacks,omitempty"`
	ContextFallback string   `json:"context_fallback,omitempty"`
}

// TargetInput is one route target, naming its provider by slug.
type TargetInput struct {
	Provider      string `json:"provider"`
	UpstreamModel string `json:"upstream_model,omitempty"`
	Weight        *int   `json:"weight,omitempty"`
	// Priority is the target's tier: lower is preferred (default 0).
	Priority int `json:"priority,omitempty"`
	// ContextLimit overrides the provider's context for this target;
	// configured providers only.
	ContextLimit int `json:"context_limit,omitempty"`
	// Prices override the provider's for this target; absent: the
	// provider's.
	Prices *PricesInput `json:"prices,omitempty"`
}

// RoutePatch changes a route; Targets, when present, replaces them all.
type RoutePatch struct {
	Model    *string        `json:"model"`
	Strategy *string        `json:"strategy"`
	Targets  *[]TargetInput `json:"targets"`
	Policy   *store.Policy  `json:"policy"`
	RPMLimit *int           `json:"rpm_limit"`
	TPMLimit *int           `json:"tpm_limit"`
	// Fallbacks, when present, replaces the list ([] clears it);
	// ContextFallback "" clears it.
	Fallbacks       *[]string `json:"fallbacks"`
	ContextFallback *string   `json:"context_fallback"`
}

// RouteView is a route as the API shows it.
type RouteView struct {
	Model    string       `json:"model"`
	Strategy string       `json:"strategy"`
	Targets  []TargetView `json:"targets"`
	Policy   store.Policy `json:"policy"`
	RPMLimit int          `json:"rpm_limit,omitempty"`
	TPMLimit int          `json:"tpm_limit,omitempty"`
	// Fallbacks is always a list ([] for none).
	Fallbacks       []string  `json:"fallbacks"`
	ContextFallback string    `json:"context_fallback,omitempty"`
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
}

// TargetView is a route target as the API shows it.
type TargetView struct {
	Provider      string `json:"provider"`
	UpstreamModel string `json:"upstream_model,omitempty"`
	Weight        int    `json:"weight"`
	Priority      int    `json:"priority"`
	ContextLimit  int    `json:"context_limit,omitempty"`
	// Prices are the target's own; absent: the provider's.
	Prices *store.Prices `json:"prices,omitempty"`
	// Routable says whether the gateway may send this target traffic now,
	// and Reason why not: its provider is not ready, its upstream_model
	// is not the model an upstream-metadata provider serves, or its
	// upstream answered that it no longer serves the model (stale). Shown
	// on reads when live readiness is known.
	Routable *bool  `json:"routable,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// targetReadiness fills the targets' Routable and Reason from the live
// readiness of their providers (design 003), for the route's org.
func (s *Service) targetReadiness(org string, v RouteView) RouteView {
	if s.ready == nil || s.snap == nil {
		return v
	}
	sn := s.snap.Current()
	if sn == nil || sn.Org(org) == nil {
		return v
	}
	o := sn.Org(org)
	for i := range v.Targets {
		tg := &v.Targets[i]
		p := o.Providers.At(tg.Provider)
		if p == nil {
			continue
		}
		st, ok := s.ready.Status(p.ID)
		if !ok {
			continue
		}
		routable, reason := true, ""
		sent := tg.UpstreamModel
		switch {
		case !st.Ready:
			routable, reason = false, "provider not ready: "+st.Reason
		case p.MetadataSource == store.MetadataUpstream && tg.UpstreamModel != "" && tg.UpstreamModel != st.Facts.ModelID:
			routable = false
			reason = fmt.Sprintf("upstream_model %q is not the model provider %q serves (%q, discovered): nothing is forwarded on a guess; "+
				"clear upstream_model or set it to the served id", tg.UpstreamModel, p.Slug, st.Facts.ModelID)
		default:
			if p.MetadataSource == store.MetadataUpstream {
				sent = st.Facts.ModelID
			}
			if why, stale := st.Stale[sent]; stale {
				routable, reason = false, fmt.Sprintf("stale: model %q: %s", sent, why)
			}
		}
		tg.Routable, tg.Reason = &routable, reason
	}
	return v
}

func routeView(r store.Route) RouteView {
	v := RouteView{Model: r.Model, Strategy: r.Strategy, Targets: []TargetView{}, Policy: r.Policy,
		RPMLimit: r.RPMLimit, TPMLimit: r.TPMLimit, Fallbacks: slices.Clone(r.Fallbacks), ContextFallback: r.ContextFallback,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if v.Fallbacks == nil {
		v.Fallbacks = []string{}
	}
	for _, t := range r.Targets {
		v.Targets = append(v.Targets, TargetView{Provider: t.ProviderSlug, UpstreamModel: t.UpstreamModel, Weight: t.Weight,
			Priority: t.Priority, ContextLimit: t.ContextLimit, Prices: t.Prices})
	}
	return v
}

// checkModelName: route names are what clients send; they may contain '/'
// but no whitespace or control characters.
// ModelNameProblem is the admin API's rule for route and upstream model
// names, for importers: why m is not one, or "".
func ModelNameProblem(m string) string {
	fe := fieldErrors{}
	checkModelName(fe, "m", m)
	return fe["m"]
}

func checkModelName(fe fieldErrors, field, m string) {
	if m == "" || len(m) > 256 {
		fe.add(field, "is required (1-256 characters)")
		return
	}
	for _, c := range m {
		if unicode.IsSpace(c) || unicode.IsControl(c) {
			fe.add(field, "must not contain whitespace or control characters")
			return
		}
	}
}

// checkPolicy validates a route's, group's or provider's policy (SPEC §6).
func checkPolicy(fe fieldErrors, p store.Policy) {
	if p.MaxOutputTokens < 0 {
		fe.add("policy.max_output_tokens", "must be positive")
	}
	if p.MaxConcurrency < 0 {
		fe.add("policy.max_concurrency", "must be positive")
	}
	for field, v := range map[string]string{"policy.tools": p.Tools, "policy.media": p.Media} {
		if v != "" && v != "allow" && v != "deny" {
			fe.add(field, `must be "allow" or "deny"`)
		}
	}
}

// resolveRoute validates r and resolves target provider slugs in org.
func (s *Service) resolveRoute(ctx context.Context, orgID int64, r *store.Route, targets []TargetInput) error {
	return resolveRouteWith(r, targets, func(slug string) (*store.Provider, error) { return s.liveProviderBySlug(ctx, orgID, slug) })
}

// resolveRouteWith is resolveRoute with the org's live providers looked up
// by live: nil for a slug no live provider has. A batch of creates
// (routeBatch) looks them up in a map it read once.
func resolveRouteWith(r *store.Route, targets []TargetInput, live func(slug string) (*store.Provider, error)) error {
	fe := fieldErrors{}
	checkModelName(fe, "model", r.Model)
	if r.Strategy == "" {
		r.Strategy = "weighted"
	}
	if !contains(strategies, r.Strategy) {
		fe.add("strategy", "must be one of %s", strings.Join(strategies, ", "))
	}
	checkPolicy(fe, r.Policy)
	checkRateLimit(fe, "rpm_limit", r.RPMLimit)
	checkRateLimit(fe, "tpm_limit", r.TPMLimit)
	if len(targets) == 0 {
		fe.add("targets", "needs at least one target")
	}
	if len(targets) > MaxTargets {
		fe.add("targets", "holds %d targets; at most %d", len(targets), MaxTargets)
		return fe.err()
	}
	var unknown []string
	r.Targets = r.Targets[:0]
	for i, t := range targets {
		field := fmt.Sprintf("targets[%d]", i)
		w := checkWeight(fe, field+".weight", t.Weight)
		if t.Priority < 0 || t.Priority > MaxPriority {
			fe.add(field+".priority", "must be 0-%d (lower is preferred)", MaxPriority)
		}
		if t.UpstreamModel != "" {
			checkModelName(fe, field+".upstream_model", t.UpstreamModel)
		}
		if t.Provider == "" {
			fe.add(field+".provider", "is required")
			continue
		}
		pv, err := live(t.Provider)
		switch {
		case err != nil:
			return err
		case pv != nil:
			if t.ContextLimit < 0 {
				fe.add(field+".context_limit", "must be positive")
			} else if t.ContextLimit > 0 && pv.MetadataSource == store.MetadataUpstream {
				fe.add(field+".context_limit", "cannot be configured for a provider whose metadata_source is \"upstream\": the upstream reports it")
			}
			r.Targets = append(r.Targets, store.Target{ProviderID: pv.ID, ProviderSlug: pv.Slug, UpstreamModel: t.UpstreamModel, Weight: w,
				Priority: t.Priority, ContextLimit: t.ContextLimit,
				Prices: checkPrices(fe, field+".prices", t.Prices)})
		default:
			unknown = append(unknown, field+".provider")
		}
	}
	if err := fe.err(); err != nil {
		return err
	}
	if len(unknown) > 0 {
		e := &Error{Kind: ErrInvalid, Code: CodeUnknownProvider,
			Message: "a target names a provider that does not exist (or is deleted) in this org", Fields: map[string]string{}}
		for _, f := range unknown {
			e.Fields[f] = "no such provider"
		}
		return e
	}
	return nil
}

// CreateRoute creates a route in a project.
func (s *Service) CreateRoute(ctx context.Context, org, project string, in RouteInput) (RouteView, error) {
	o, pj, err := s.project(ctx, org, project)
	if err != nil {
		return RouteView{}, err
	}
	r := newRoute(pj, in)
	if err := s.resolveRoute(ctx, o.ID, r, in.Targets); err != nil {
		return RouteView{}, err
	}
	if err := s.checkFallbacks(ctx, r, ""); err != nil {
		return RouteView{}, err
	}
	if err := s.checkHandTargets(ctx, o.ID, r, nil); err != nil {
		return RouteView{}, err
	}
	if err := s.committed(ctx, fromStore(s.st.CreateRoute(ctx, r), "route")); err != nil {
		return RouteView{}, err
	}
	return routeView(*r), nil
}

func (s *Service) route(ctx context.Context, org, project, model string) (*store.Org, *store.Route, error) {
	o, pj, err := s.project(ctx, org, project)
	if err != nil {
		return nil, nil, err
	}
	r, err := s.st.GetRoute(ctx, pj.ID, model)
	if err != nil {
		return nil, nil, fromStore(err, "route "+quote(model)+" in project "+quote(project))
	}
	return o, r, nil
}

// PatchRoute changes a route; absent fields stay, and targets, when given,
// replace the route's targets whole.
func (s *Service) PatchRoute(ctx context.Context, org, project, model string, in RoutePatch) (RouteView, error) {
	o, rt, err := s.route(ctx, org, project, model)
	if err != nil {
		return RouteView{}, err
	}
	if in.Model != nil {
		rt.Model = *in.Model
	}
	if in.Strategy != nil {
		rt.Strategy = *in.Strategy
	}
	if in.Policy != nil {
		rt.Policy = *in.Policy
	}
	if in.RPMLimit != nil {
		rt.RPMLimit = *in.RPMLimit
	}
	if in.TPMLimit != nil {
		rt.TPMLimit = *in.TPMLimit
	}
	if in.Fallbacks != nil {
		rt.Fallbacks = *in.Fallbacks
	}
	if in.ContextFallback != nil {
		rt.ContextFallback = *in.ContextFallback
	}
	targets := make([]TargetInput, 0, len(rt.Targets))
	for _, t := range rt.Targets {
		w := t.Weight
		targets = append(targets, TargetInput{Provider: t.ProviderSlug, UpstreamModel: t.UpstreamModel, Weight: &w, Priority: t.Priority, ContextLimit: t.ContextLimit,
			Prices: pricesInput(t.Prices)})
	}
	if in.Targets != nil {
		targets = *in.Targets
	}
	old := slices.Clone(rt.Targets)
	if in.Model != nil && *in.Model != model {
		old = nil // another pool's route now
	}
	if err := s.resolveRoute(ctx, o.ID, rt, targets); err != nil {
		return RouteView{}, err
	}
	if err := s.checkFallbacks(ctx, rt, model); err != nil {
		return RouteView{}, err
	}
	if err := s.checkHandTargets(ctx, o.ID, rt, old); err != nil {
		return RouteView{}, err
	}
	if err := s.committed(ctx, fromStore(s.st.UpdateRoute(ctx, rt), "route")); err != nil {
		return RouteView{}, err
	}
	return routeView(*rt), nil
}

// DeleteRoute removes a route.
func (s *Service) DeleteRoute(ctx context.Context, org, project, model string) error {
	_, rt, err := s.route(ctx, org, project, model)
	if err != nil {
		return err
	}
	if err := s.refuseIfFallback(ctx, rt, "deleted"); err != nil {
		return err
	}
	return s.committed(ctx, fromStore(s.st.DeleteRoute(ctx, rt.ID), "route"))
}

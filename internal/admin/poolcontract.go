package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rolter/rolter/internal/fleet"
	"github.com/rolter/rolter/internal/store"
)

// The pool contract (design 002: "model_name is a contract with callers";
// "if two routes share a model_name, their caller-visible parameters must
// match") holds between a fleet route's hosts (poolCheck, hosts.go) and
// equally for a target added to that route by hand: a configured provider
// next to the hosts must serve the same model with the same context and
// modalities, as far as rolter knows them. A parameter rolter does not
// know for one side (a provider with no context_limit, an upstream one
// not probed yet, modalities no probe reported) is not compared.

// poolParams are a pool's caller-visible parameters as rolter knows them.
type poolParams struct {
	host       int64    // the host they are read from
	served     string   // the served model name
	context    int      // --max-model-len; 0: unknown
	modalities []string // sorted; nil: unknown
}

// poolParamsOf reads the pool's parameters from its first host with a
// recipe (the hosts agree, poolCheck sees to it), or from recipeHost when
// set; modalities from the readiness of the hosts' registered providers.
func (s *Service) poolParamsOf(hosts []store.Host, recipeHost *store.Host) (poolParams, bool) {
	var p poolParams
	from := recipeHost
	for i := range hosts {
		if from == nil && hosts[i].Recipe.VLLM != nil {
			from = &hosts[i]
		}
	}
	if from == nil || from.Recipe.VLLM == nil {
		return p, false
	}
	p = poolParams{host: from.ID, served: from.Recipe.VLLM.ServedName(), context: fleet.MaxModelLen(from.Recipe.VLLM)}
	for _, h := range hosts {
		if mods := s.knownModalities(h.ProviderID); mods != nil {
			p.modalities = mods
			break
		}
	}
	return p, true
}

// knownModalities are the modalities a ready provider's probe reported,
// sorted; nil when unknown.
func (s *Service) knownModalities(providerID int64) []string {
	if s.ready == nil || providerID == 0 {
		return nil
	}
	st, ok := s.ready.Status(providerID)
	if !ok || !st.Ready || st.Facts.Modalities == nil {
		return nil
	}
	return slices.Sorted(slices.Values(st.Facts.Modalities))
}

// targetParams are what rolter knows of a hand-added target's
// caller-visible parameters: the model it sends (its upstream_model, else
// the route's name, or what an upstream-metadata provider discovered) and
// its context (the target's, else the provider's configured or discovered
// one).
func (s *Service) targetParams(pv *store.Provider, t store.Target, routeModel string) poolParams {
	p := poolParams{served: t.UpstreamModel, context: t.ContextLimit, modalities: s.knownModalities(pv.ID)}
	if p.context == 0 {
		p.context = pv.ContextLimit
	}
	upstream := pv.MetadataSource == store.MetadataUpstream
	if p.served == "" && !upstream {
		p.served = routeModel
	}
	if upstream && s.ready != nil {
		if st, ok := s.ready.Status(pv.ID); ok && st.Ready {
			if p.served == "" {
				p.served = st.Facts.ModelID
			}
			if p.context == 0 {
				p.context = st.Facts.Context
			}
		}
	}
	return p
}

// contractDiff is the first known parameter on which a target differs
// from its pool.
func contractDiff(pool, t poolParams) (name, theirs, ours string, differ bool) {
	switch {
	case t.served != "" && t.served != pool.served:
		return "served model name", quote(pool.served), quote(t.served), true
	case pool.context > 0 && t.context > 0 && pool.context != t.context:
		return "context", strconv.Itoa(pool.context), strconv.Itoa(t.context), true
	case pool.modalities != nil && t.modalities != nil && !slices.Equal(pool.modalities, t.modalities):
		return "modalities", strings.Join(pool.modalities, ","), strings.Join(t.modalities, ","), true
	}
	return "", "", "", false
}

// checkHandTargets refuses a route write that adds, to a route whose
// model has live fleet hosts in its project, a target that is not one of
// those hosts and breaks their contract (409 pool_contract_mismatch
// naming the parameter). Targets the route already had (old) are not
// judged again, so a route edit never fails on what was there before.
func (s *Service) checkHandTargets(ctx context.Context, orgID int64, r *store.Route, old []store.Target) error {
	hosts, err := s.st.ListPoolHosts(ctx, orgID, r.ProjectID, r.Model)
	if err != nil {
		return fromStore(err, "hosts")
	}
	return s.checkPoolTargets(ctx, orgID, r, old, hosts)
}

// checkPoolTargets is checkHandTargets against hosts, the live hosts of
// r's pool (store.Store.ListPoolHosts).
func (s *Service) checkPoolTargets(ctx context.Context, orgID int64, r *store.Route, old []store.Target, hosts []store.Host) error {
	pool, ok := s.poolParamsOf(hosts, nil)
	if !ok {
		return nil
	}
	fleetProv := map[int64]bool{}
	for _, h := range hosts {
		fleetProv[h.ProviderID] = h.ProviderID != 0
	}
	for i, t := range r.Targets {
		if fleetProv[t.ProviderID] || slices.ContainsFunc(old, func(o store.Target) bool {
			return o.ProviderID == t.ProviderID && o.UpstreamModel == t.UpstreamModel && o.ContextLimit == t.ContextLimit
		}) {
			continue
		}
		pv, err := s.st.GetProvider(ctx, orgID, t.ProviderSlug)
		if err != nil {
			return fromStore(err, "provider "+quote(t.ProviderSlug))
		}
		if name, theirs, ours, differ := contractDiff(pool, s.targetParams(pv, t, r.Model)); differ {
			field := fmt.Sprintf("targets[%d]", i)
			return &Error{Kind: ErrConflict, Code: CodePoolContract,
				Message: fmt.Sprintf("%s: %s differs from the fleet pool %s (host %d): the pool has %s, provider %s has %s; a target added next to fleet hosts joins their contract, so callers of %s see one model whichever target answers (design 002)",
					field, name, quote(r.Model), pool.host, theirs, quote(t.ProviderSlug), ours, quote(r.Model)),
				Fields: map[string]string{field: name + " differs from host " + strconv.FormatInt(pool.host, 10)}}
		}
	}
	return nil
}

// checkRecipeTargets refuses a host's new recipe that breaks the contract
// with the targets added by hand to its pool's route (design 002): the
// same check as checkHandTargets, run from the other side, when the
// recipe's caller-visible parameters change (tuning alone is free).
func (s *Service) checkRecipeTargets(ctx context.Context, h *store.Host) error {
	cur, err := s.st.GetHost(ctx, h.OrgID, h.ID)
	if err != nil {
		return fromStore(err, "host")
	}
	if cur.Recipe.VLLM != nil && h.Recipe.VLLM != nil {
		if _, _, _, differ := fleet.ContractDiff(cur.Recipe.VLLM, h.Recipe.VLLM); !differ {
			return nil
		}
	}
	rt, err := s.st.GetRoute(ctx, h.ProjectID, h.ModelName)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return fromStore(err, "route")
	}
	hosts, err := s.st.ListPoolHosts(ctx, h.OrgID, h.ProjectID, h.ModelName)
	if err != nil {
		return fromStore(err, "hosts")
	}
	pool, ok := s.poolParamsOf(hosts, h)
	if !ok {
		return nil
	}
	fleetProv := map[int64]bool{h.ProviderID: h.ProviderID != 0}
	for _, o := range hosts {
		fleetProv[o.ProviderID] = fleetProv[o.ProviderID] || o.ProviderID != 0
	}
	for _, t := range rt.Targets {
		if fleetProv[t.ProviderID] {
			continue
		}
		pv, err := s.st.GetProvider(ctx, h.OrgID, t.ProviderSlug)
		if err != nil {
			return fromStore(err, "provider "+quote(t.ProviderSlug))
		}
		if name, ours, theirs, differ := contractDiff(pool, s.targetParams(pv, t, rt.Model)); differ {
			return &Error{Kind: ErrConflict, Code: CodePoolContract,
				Message: fmt.Sprintf("%s differs from provider %s, a target of the route %s: it has %s, this recipe has %s; a target added next to fleet hosts shares their contract (design 002): change or remove that target first",
					name, quote(t.ProviderSlug), quote(rt.Model), theirs, ours),
				Fields: map[string]string{"recipe.vllm": name + " differs from provider " + t.ProviderSlug}}
		}
	}
	return nil
}

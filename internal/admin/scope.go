package admin

import (
	"context"

	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
)

// Admin token scopes (issue 14 §5). A global token manages everything. An
// org token manages its one org: every other org, and what only a global
// token may do (creating orgs, the admin tokens), is not found for it,
// exactly as if it did not exist, so an org token cannot even learn which
// other orgs exist. Only a global token mints or revokes tokens, because a
// token that mints tokens could outlive its own revocation.
//
// The Service applies the rule on every call, whoever the caller. The admin
// API (package adminapi) applies it once more, to the route, before it
// reads a body, so that a refused request fails the same way whatever it
// carries.

type scopeKey struct{}

// WithScope returns ctx carrying the scope of the admin token a caller
// presented. The Service confines an org-scoped token to its org: every
// other org, and what only a global token may do (orgs' creation, admin
// tokens), is not found for it. A context without a scope is global: the
// Service called in-process (bootstrap, config import).
func WithScope(ctx context.Context, sc snapshot.AdminScope) context.Context {
	return context.WithValue(ctx, scopeKey{}, sc)
}

// ScopeOf returns the scope WithScope put in ctx. A context without one is
// global: that is only the Service called in-process (bootstrap, config
// import).
func ScopeOf(ctx context.Context) snapshot.AdminScope {
	sc, _ := ctx.Value(scopeKey{}).(snapshot.AdminScope)
	return sc
}

// CheckOrgScope returns nil when the scope in ctx reaches org, and
// otherwise the error a missing org gets (ErrNotFound, CodeNotFound), so
// that another org is indistinguishable from none.
func CheckOrgScope(ctx context.Context, org string) error {
	if sc := ScopeOf(ctx); !sc.Global() && org != sc.Org {
		return notFound("org %s not found", quote(org))
	}
	return nil
}

// checkOrgID confirms that an org found by name is the scoped token's org
// by id: an org renamed to the token's org name on another replica, before
// this one's snapshot has caught up, is not it.
func checkOrgID(ctx context.Context, o *store.Org) error {
	if sc := ScopeOf(ctx); !sc.Global() && o.ID != sc.OrgID {
		return notFound("org %s not found", quote(o.Name))
	}
	return nil
}

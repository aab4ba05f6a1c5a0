package admin

import (
	"context"
	"net/http"
	"strings"

	"github.com/rolter/rolter/internal/snapshot"
)

// Admin token scopes (issue 14 §5). A global token manages everything. An
// org token manages its one org: every path under /orgs/{org} with that
// org, and the org list, which shows only that org. Everything else answers
// it 404, exactly as if the org or endpoint did not exist, so an org token
// cannot even learn which other orgs exist. That includes creating orgs and
// the token API (/tokens): only a global token mints or revokes tokens,
// because a token that mints tokens could outlive its own revocation.
//
// The rule is applied in one place, allowScope, which the dispatch wrapper
// (Handler.handle) runs before any handler: a route added later is covered
// without touching it, and a path outside /orgs/{org} is global-only unless
// listed here.

type scopeKey struct{}

func withScope(ctx context.Context, sc snapshot.AdminScope) context.Context {
	return context.WithValue(ctx, scopeKey{}, sc)
}

// scopeOf returns the scope of the request's admin token. A request that
// did not pass ServeHTTP has none and is treated as global: that is only
// the Service called in-process (bootstrap, config import).
func scopeOf(ctx context.Context) snapshot.AdminScope {
	sc, _ := ctx.Value(scopeKey{}).(snapshot.AdminScope)
	return sc
}

// orgScopedOK lists the patterns outside /orgs/{org} an org token may use;
// their handlers narrow what they show to the token's org.
var orgScopedOK = map[string]bool{
	"GET /orgs": true,
}

// allowScope decides whether the request's token may use the route pattern
// (method and path under Prefix) that matched it. A refusal is the 404 the
// caller would see for a missing org or endpoint, and happens before the
// handler reads the body or touches the store, so it changes nothing.
func allowScope(r *http.Request, method, path string) error {
	sc := scopeOf(r.Context())
	if sc.Global() {
		return nil
	}
	if path == "/orgs/{org}" || strings.HasPrefix(path, "/orgs/{org}/") {
		if org := r.PathValue("org"); org != sc.Org {
			return notFound("org %s not found", quote(org))
		}
		return nil
	}
	if orgScopedOK[method+" "+path] {
		return nil
	}
	return notFound("no admin endpoint at %s", r.URL.Path)
}

package adminapi

import (
	"net/http"
	"strings"

	"github.com/rolter/rolter/internal/admin"
)

// The token-scope gate (issue 14 §5; the rule itself is package admin's,
// see admin.CheckOrgScope). An org token may use every path under
// /orgs/{org} with its own org, and the org list, which shows only that
// org. Everything else answers it 404, exactly as if the org or endpoint did
// not exist: other orgs, creating orgs and the token API (/tokens).
//
// The gate is applied in one place, allowScope, which the dispatch wrapper
// (Handler.handle) runs before any handler: a route added later is covered
// without touching it, and a path outside /orgs/{org} is global-only unless
// listed here. The Service checks the scope again on every call; the gate
// is what refuses before the body is read, so that a refused request fails
// the same way whatever it carries.

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
	if admin.ScopeOf(r.Context()).Global() {
		return nil
	}
	if path == "/orgs/{org}" || strings.HasPrefix(path, "/orgs/{org}/") {
		return admin.CheckOrgScope(r.Context(), r.PathValue("org"))
	}
	if orgScopedOK[method+" "+path] {
		return nil
	}
	return noEndpoint(r)
}

package adminapi

import (
	"mime"
	"net/http"
	"strings"

	"github.com/rolter/rolter/internal/admin"
)

// Admin responses are JSON for API clients, never documents for a
// browser: nothing may be sniffed, framed or run.
const adminCSP = "default-src 'none'; frame-ancestors 'none'"

func setSecurityHeaders(h http.Header) {
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", adminCSP)
}

// errMediaType refuses a body that declares itself as something other than
// JSON.
var errMediaType = &admin.Error{Kind: errUnsupportedMedia, Code: admin.CodeUnsupportedMediaType,
	Message: "send the body as JSON: Content-Type: application/json"}

// acceptableBody reports whether a POST or PATCH may carry a body of this
// Content-Type. CSRF is already stopped by the bearer token (a browser
// cannot attach it cross-origin without CORS, which the API never grants),
// so this rule is about refusing what is clearly not JSON: absent,
// application/json and application/*+json are accepted, and so is
// application/x-www-form-urlencoded, because that is what `curl -d` sends
// by default and the README's examples rely on it; the body must still
// decode as one JSON object.
func acceptableBody(r *http.Request) bool {
	if r.Method != http.MethodPost && r.Method != http.MethodPatch {
		return true
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	switch {
	case mt == "application/json", mt == "application/x-www-form-urlencoded":
		return true
	case strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"):
		return true
	}
	return false
}

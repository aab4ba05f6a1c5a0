package gateway

import (
	"net/http"
	"strings"

	"github.com/rolter/rolter/internal/store"
)

// forwardHeaders are the client headers an upstream sees; everything else
// stays at the gateway. An allowlist, because the operator's key pays: a
// client must not pick what it bills to (OpenAI-Organization,
// OpenAI-Project) nor send anything else the operator did not choose.
var forwardHeaders = map[string][]string{
	"":                  {"Accept", "Openai-Beta"},                         // OpenAI-compatible kinds (canonical keys)
	store.KindAnthropic: {"Accept", "Anthropic-Version", "Anthropic-Beta"}, // Messages API
}

// upstreamHeaders sets the headers of an upstream request: the allowlisted
// client headers for the target's kind, JSON as the content type whatever
// the client declared (curl's default form encoding would be refused), and
// the request id.
func upstreamHeaders(dst, src http.Header, p *providerRT, requestID string) {
	allow := forwardHeaders[""]
	if p.kind == store.KindAnthropic {
		allow = forwardHeaders[store.KindAnthropic]
	}
	for _, k := range allow {
		if vs := src[k]; len(vs) > 0 {
			dst[k] = vs
		}
	}
	// The operator's additions (settings.forward_headers, validated by the
	// admin API to exclude credentials and framing).
	if f := p.forward; f != nil {
		for _, k := range f.names {
			if vs := src[k]; len(vs) > 0 {
				dst[k] = vs
			}
		}
		if len(f.prefixes) > 0 {
			for k, vs := range src {
				for _, pre := range f.prefixes {
					if strings.HasPrefix(k, pre) {
						dst[k] = vs
					}
				}
			}
		}
	}
	dst["Content-Type"] = jsonContentType
	dst["X-Request-Id"] = []string{requestID}
}

var jsonContentType = []string{"application/json"}

// responseHeaders are the upstream response headers a client sees: an
// allowlist, like the request side. The rest describe the operator's
// account or servers (OpenAI-Organization, OpenAI-Project,
// anthropic-organization-id, the upstream's own x-ratelimit-* quota, which
// would contradict the caller's limits at the gateway (limits.go), Server,
// Set-Cookie, its request id) and stay at the gateway.
var responseHeaders = []string{"Content-Type", "Content-Encoding", "Content-Language", "Cache-Control", "Retry-After"}

// copyResponseHeaders copies the allowlisted response headers.
func copyResponseHeaders(dst, src http.Header) {
	for _, k := range responseHeaders {
		if vs := src[k]; len(vs) > 0 {
			dst[k] = vs
		}
	}
}

package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/jsonscan"
	"github.com/rolter/rolter/internal/resolve"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/snapshot"
)

// authenticate finds the caller's virtual key: Authorization: Bearer or
// x-api-key (Anthropic SDKs send the latter).
func authenticate(s *snapshot.Snapshot, r *http.Request, now time.Time) (*snapshot.VirtualKey, bool) {
	tok := r.Header.Get("x-api-key")
	if v, ok := secret.Bearer(r.Header.Get("Authorization")); ok {
		tok = v
	}
	if tok == "" || s == nil {
		return nil, false
	}
	return s.Authenticate(tok, now)
}

// allowed checks the key's model allowlist against the address the client
// sent. An entry is an exact model, "prefix/*" for everything under a
// provider or group slug, or "*".
func allowed(k *snapshot.VirtualKey, model string) bool {
	if len(k.Models) == 0 {
		return true
	}
	for _, m := range k.Models {
		if m == model || m == "*" {
			return true
		}
		if p, ok := strings.CutSuffix(m, "/*"); ok && strings.HasPrefix(model, p+"/") {
			return true
		}
	}
	return false
}

// resolve maps the client's model string to a plan in the key's scope
// (package resolve has the rules), then applies x-rolter-provider.
func (g *Gateway) resolve(t *table, k *snapshot.VirtualKey, model, pin string) (*routePlan, *apiError) {
	a, ok := resolve.Resolve(k.Project, model)
	var plan *routePlan
	if ok {
		plan = g.plan(t, a)
	}
	if plan == nil || len(plan.targets) == 0 {
		return nil, newError(http.StatusNotFound, "model_not_found",
			"model "+quoteModel(model)+" does not exist or has no serving target; GET /v1/models lists the models this key can use")
	}
	if a.Kind == resolve.KindProvider {
		// design 003: a pinned upstream-metadata provider serves its one
		// discovered model; another name is never forwarded on a guess.
		if p := plan.targets[0].provider; p.upstream {
			if st := g.status(p); st.Ready && st.Facts.ModelID != a.Model {
				return nil, newError(http.StatusNotFound, "model_not_found",
					"provider "+quoteModel(p.slug)+" serves "+quoteModel(st.Facts.ModelID)+", not "+quoteModel(a.Model)+
						"; address it as "+quoteModel(p.slug+"/"+st.Facts.ModelID))
			}
		}
	}
	if pin != "" {
		if plan = plan.only(pin); len(plan.targets) == 0 {
			return nil, newError(http.StatusBadRequest, "provider_not_in_route",
				"x-rolter-provider names "+quoteModel(pin)+", which serves no target of "+quoteModel(model))
		}
	}
	return plan, nil
}

func quoteModel(m string) string {
	if len(m) > 120 {
		m = m[:120] + "…"
	}
	return `"` + m + `"`
}

// streamRequested reports whether the top-level "stream" member is true.
func streamRequested(body []byte) bool {
	s, e, found, err := jsonscan.LocateKey(body, "stream")
	return err == nil && found && string(body[s:e]) == "true"
}

// usageOption is inserted into streamed chat and completion requests whose
// client did not set stream_options, so the upstream reports token counts
// in a final chunk (which the relay then strips).
var usageOption = []byte(`"stream_options":{"include_usage":true},`)

// requestUsage makes a streamed chat or completion request ask the
// upstream for a usage chunk, so that tokens are counted (usage, limits,
// budgets) whatever the client set: a client that sends no stream_options,
// or include_usage false, must not stream for free. It reports whether the
// usage chunk is the gateway's own (the relay then strips it).
func requestUsage(body []byte, endpoint string) ([]byte, bool) {
	if endpoint != "/chat/completions" && endpoint != "/completions" {
		return body, false
	}
	s, e, found, err := jsonscan.LocateKey(body, "stream_options")
	if err != nil {
		return body, false
	}
	if !found {
		i := bytes.IndexByte(body, '{')
		if i < 0 {
			return body, false
		}
		out := make([]byte, 0, len(body)+len(usageOption))
		out = append(out, body[:i+1]...)
		out = append(out, usageOption...)
		return append(out, body[i+1:]...), true
	}
	// The client's own options, with include_usage set: its other options
	// (vLLM's continuous_usage_stats) are kept.
	opts := map[string]json.RawMessage{}
	if v := bytes.TrimSpace(body[s:e]); string(v) != "null" && (json.Unmarshal(v, &opts) != nil || opts == nil) {
		return body, false // not an object: the upstream will refuse it
	}
	if string(bytes.TrimSpace(opts["include_usage"])) == "true" {
		return body, false // the client asked: it gets the chunk
	}
	opts["include_usage"] = json.RawMessage("true")
	merged, err := json.Marshal(opts)
	if err != nil {
		return body, false
	}
	out := make([]byte, 0, len(body)+len(merged))
	out = append(out, body[:s]...)
	out = append(out, merged...)
	return append(out, body[e:]...), true
}

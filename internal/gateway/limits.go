package gateway

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/rolter/rolter/internal/ratelimit"
	"github.com/rolter/rolter/internal/resolve"
)

// Rate limits (docs/limits.md): every request counts against the
// requests- and tokens-per-minute limits of its virtual key, its project
// and, when it names a route, that route, on every address kind. The token
// limits admit on an estimate (estimateTokens) and are corrected with the
// real usage when the request ends (settle, from account).

// rateTicket is what settle needs to correct the token limits a request
// was admitted on; n == 0: nothing to correct.
type rateTicket struct {
	tokens   [3]ratelimit.Limit
	n        int
	estimate int64
	shared   bool
}

// limit checks and takes every limit that applies to x, after admission
// and before forwarding. It writes the rate limit headers of the tightest
// limits on w, for the answer whatever it is, and refuses with 429
// rate_limited when a limit is reached.
func (g *Gateway) limit(ctx context.Context, w http.ResponseWriter, x *exchange) *apiError {
	k := x.key
	var buf [6]ratelimit.Limit
	lims := buf[:0]
	add := func(scope ratelimit.Scope, id int64, rpm, tpm int) {
		if rpm > 0 {
			lims = append(lims, ratelimit.Limit{Scope: scope, ID: id, Unit: ratelimit.Requests, PerMinute: int64(rpm), Cost: 1})
		}
		if tpm > 0 {
			lims = append(lims, ratelimit.Limit{Scope: scope, ID: id, Unit: ratelimit.Tokens, PerMinute: int64(tpm)})
		}
	}
	add(ratelimit.ScopeKey, k.ID, k.RPMLimit, k.TPMLimit)
	add(ratelimit.ScopeProject, k.ProjectID, k.Project.RPMLimit, k.Project.TPMLimit)
	// A route's limit is its callers' together; provider and group
	// addresses have no route.
	if x.plan.kind == resolve.KindRoute {
		if rt := k.Project.Routes.At(x.plan.route); rt != nil {
			add(ratelimit.ScopeRoute, rt.ID, rt.RPMLimit, rt.TPMLimit)
		}
	}
	if len(lims) == 0 {
		return nil
	}
	t := &x.rate
	for i := range lims {
		if lims[i].Unit == ratelimit.Tokens {
			if t.n == 0 {
				t.estimate = x.estimateTokens()
			}
			lims[i].Cost = t.estimate
			t.tokens[t.n] = lims[i]
			t.n++
		}
	}
	res := g.rates.Take(ctx, lims)
	writeRateHeaders(w.Header(), x.api == apiMessages, lims, res.States, g.clock.Now())
	if !res.Allowed {
		t.n = 0 // nothing taken, nothing to correct
		return refusal(lims[res.Denied], res, x)
	}
	t.shared = res.Shared
	return nil
}

// estimateTokens is what a request is admitted on against token limits:
// the prompt's lower bound (package policy: never more than the real
// prompt under any mainstream tokenizer) plus the output limit the
// upstream will apply (the client's max tokens, defaulted or clamped by
// the route's max_output_tokens in admit). A request without an output
// limit is admitted on its prompt alone; settle corrects either way.
func (x *exchange) estimateTokens() int64 {
	if x.endpoint == countTokens {
		return 0 // counting generates nothing
	}
	req, err := x.body.inspect.Request()
	if err != nil {
		return 0
	}
	output := req.MaxTokens
	if x.adm != nil {
		output = x.adm.results[x.adm.base].clamp.Limit // as admitted, clamped or defaulted
	}
	return int64(max(req.PromptLowerBound, 0)) + int64(max(output, 0))
}

// settle corrects the token limits with the usage the upstream reported.
// Without a report, a request that failed generated nothing and gives its
// estimate back; a successful one keeps it.
func (g *Gateway) settle(x *exchange) {
	t := &x.rate
	if t.n == 0 {
		return
	}
	defer func() { t.n = 0 }()
	used := int64(x.promptTokens) + int64(x.outputTokens)
	if used == 0 && x.status < 400 {
		return
	}
	delta := used - t.estimate
	if delta == 0 {
		return
	}
	lims := t.tokens[:t.n]
	for i := range lims {
		lims[i].Cost = delta
	}
	g.rates.Adjust(context.Background(), lims, t.shared)
}

// refusal is the 429 for the limit that refused.
func refusal(l ratelimit.Limit, res ratelimit.Result, x *exchange) *apiError {
	what := "key"
	switch l.Scope {
	case ratelimit.ScopeProject:
		what = "project " + quoteModel(x.key.Project.Name)
	case ratelimit.ScopeRoute:
		what = "route " + quoteModel(x.plan.route)
	}
	unit := " requests"
	if l.Unit == ratelimit.Tokens {
		unit = " tokens"
	}
	per := strconv.FormatInt(l.PerMinute, 10) + unit + " per minute"
	if res.TooLarge {
		return newError(http.StatusTooManyRequests, "rate_limited",
			"this request needs about "+strconv.FormatInt(l.Cost, 10)+" tokens (prompt plus max output tokens), more than the "+
				what+" limit of "+per+" allows at once: lower max_tokens or shorten the prompt")
	}
	secs := max(int((res.RetryAfter+time.Second-1)/time.Second), 1)
	e := newError(http.StatusTooManyRequests, "rate_limited",
		"rate limit reached: the "+what+" limit is "+per+"; retry in "+strconv.Itoa(secs)+"s")
	e.retryAfter = secs
	return e
}

// writeRateHeaders reports the tightest requests limit and the tightest
// tokens limit (fewest remaining) the way the client's API does: OpenAI's
// x-ratelimit-{limit,remaining,reset}-{requests,tokens} with the reset as
// a duration ("1s", "6m0s", "20ms"), or Anthropic's
// anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset} with the
// reset as an RFC 3339 time. It allocates only the values.
func writeRateHeaders(h http.Header, anthropic bool, lims []ratelimit.Limit, states []ratelimit.State, now time.Time) {
	var vals []string
	for u, unit := range [...]ratelimit.Unit{ratelimit.Requests, ratelimit.Tokens} {
		best := -1
		for i, l := range lims {
			if l.Unit != unit {
				continue
			}
			if best < 0 || states[i].Remaining < states[best].Remaining ||
				states[i].Remaining == states[best].Remaining && states[i].Reset > states[best].Reset {
				best = i
			}
		}
		if best < 0 {
			continue
		}
		if vals == nil {
			vals = make([]string, 6)
		}
		v := vals[3*u : 3*u+3 : 3*u+3]
		s := states[best]
		v[0], v[1] = strconv.FormatInt(s.Limit, 10), strconv.FormatInt(s.Remaining, 10)
		names := &rateHeaderNames[u]
		if anthropic {
			names = &anthropicHeaderNames[u]
			v[2] = resetTime(now, s.Reset)
		} else {
			v[2] = resetDuration(s.Reset)
		}
		for i := range v {
			h[names[i]] = v[i : i+1 : i+1]
		}
	}
}

// The header names in canonical form, per unit: limit, remaining, reset.
var (
	rateHeaderNames = [2][3]string{
		{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"},
		{"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"},
	}
	anthropicHeaderNames = [2][3]string{
		{"Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset"},
		{"Anthropic-Ratelimit-Tokens-Limit", "Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Reset"},
	}
)

// resetTime is the RFC 3339 time, to the second and never early, when a
// limit is full again.
func resetTime(now time.Time, d time.Duration) string {
	return now.Add(d).Add(time.Second - 1).Truncate(time.Second).UTC().Format(time.RFC3339)
}

// resetDuration formats like OpenAI's reset headers: Go duration syntax in
// whole milliseconds ("20ms", "1s", "6m0s").
func resetDuration(d time.Duration) string {
	return d.Round(time.Millisecond).String()
}

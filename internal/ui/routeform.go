package ui

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/store"
)

// policyForm is a policy (store.Policy) as typed; routes and groups share
// it.
type policyForm struct {
	MaxOutputTokens, MaxConcurrency, Tools, Media string
}

// tristates are the choices of a policy's tools and media.
var tristates = []string{"", "allow", "deny"}

func policyFormOf(p store.Policy) policyForm {
	return policyForm{MaxOutputTokens: num(p.MaxOutputTokens), MaxConcurrency: num(p.MaxConcurrency), Tools: p.Tools, Media: p.Media}
}

func readPolicyForm(r *request) policyForm {
	f := func(name string) string { return strings.TrimSpace(r.PostForm.Get(name)) }
	return policyForm{MaxOutputTokens: f("policy.max_output_tokens"), MaxConcurrency: f("policy.max_concurrency"),
		Tools: f("policy.tools"), Media: f("policy.media")}
}

// policy parses the numbers, naming a bad one by the Service's field name.
func (f policyForm) policy(fe map[string]string) store.Policy {
	return store.Policy{MaxOutputTokens: parseInt(fe, "policy.max_output_tokens", f.MaxOutputTokens),
		MaxConcurrency: parseInt(fe, "policy.max_concurrency", f.MaxConcurrency), Tools: f.Tools, Media: f.Media}
}

// num is a number as a form shows it: empty for 0 ("not set").
func num(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// routeInput is the form converted for the Service.
type routeInput struct {
	Model, Strategy    string
	Targets            []admin.TargetInput
	Policy             store.Policy
	RPMLimit, TPMLimit int
	Fallbacks          []string
	ContextFallback    string
}

func readRouteForm(r *request) routeForm {
	f := func(name string) string { return strings.TrimSpace(r.PostForm.Get(name)) }
	form := routeForm{Model: f("model"), Strategy: f("strategy"), RPMLimit: f("rpm_limit"), TPMLimit: f("tpm_limit"),
		Policy: readPolicyForm(r), Fallbacks: f("fallbacks"), ContextFallback: f("context_fallback")}
	col := func(name string, i int) string {
		vs := r.PostForm[name]
		if i < len(vs) {
			return strings.TrimSpace(vs[i])
		}
		return ""
	}
	for i := range r.PostForm["target_provider"] {
		t := targetForm{Provider: col("target_provider", i), UpstreamModel: col("target_model", i), Weight: col("target_weight", i),
			Priority: col("target_priority", i), ContextLimit: col("target_context", i), InputPrice: col("target_input_price", i), OutputPrice: col("target_output_price", i)}
		if t.Provider == newProviderOption {
			t.Provider = ""
		}
		// A row with neither a provider nor a model is an unused one.
		if t.Provider != "" || t.UpstreamModel != "" {
			form.Targets = append(form.Targets, t)
		}
	}
	return form
}

func routeFormOf(rt admin.RouteView) routeForm {
	f := routeForm{Model: rt.Model, Strategy: rt.Strategy, RPMLimit: num(rt.RPMLimit), TPMLimit: num(rt.TPMLimit),
		Policy: policyFormOf(rt.Policy), Fallbacks: strings.Join(rt.Fallbacks, ", "), ContextFallback: rt.ContextFallback}
	for _, t := range rt.Targets {
		tf := targetForm{Provider: t.Provider, UpstreamModel: t.UpstreamModel, Weight: strconv.Itoa(t.Weight), Priority: num(t.Priority),
			ContextLimit: num(t.ContextLimit)}
		if t.Prices != nil {
			tf.InputPrice, tf.OutputPrice = t.Prices.Input.PerMillion(), t.Prices.Output.PerMillion()
		}
		f.Targets = append(f.Targets, tf)
	}
	return f
}

// input converts the form; what cannot be parsed is named by the
// Service's own field names, the rest is the Service's to judge.
func (f routeForm) input() (routeInput, map[string]string) {
	fe := map[string]string{}
	in := routeInput{Model: f.Model, Strategy: f.Strategy, Policy: f.Policy.policy(fe), Targets: []admin.TargetInput{},
		RPMLimit: parseInt(fe, "rpm_limit", f.RPMLimit), TPMLimit: parseInt(fe, "tpm_limit", f.TPMLimit),
		Fallbacks: []string{}, ContextFallback: f.ContextFallback}
	for _, name := range strings.Split(f.Fallbacks, ",") {
		if name = strings.TrimSpace(name); name != "" {
			in.Fallbacks = append(in.Fallbacks, name)
		}
	}
	for i, t := range f.Targets {
		field := fmt.Sprintf("targets[%d]", i)
		ti := admin.TargetInput{Provider: t.Provider, UpstreamModel: t.UpstreamModel,
			Priority:     parseInt(fe, field+".priority", t.Priority),
			ContextLimit: parseInt(fe, field+".context_limit", t.ContextLimit)}
		ti.Weight, _ = parseWeight(fe, field+".weight", t.Weight)
		// Both prices empty: the provider's. One alone is the Service's
		// "is required" on the other.
		if t.InputPrice != "" || t.OutputPrice != "" {
			ti.Prices = &admin.PricesInput{Input: admin.Decimal(t.InputPrice), Output: admin.Decimal(t.OutputPrice)}
		}
		in.Targets = append(in.Targets, ti)
	}
	return in, fe
}

// finishRows numbers the rows and fills each one's model hint; at least
// one row is shown. saved are the stored route's targets, whose live
// routability a row that is one of them shows.
func (d *routesPage) finishRows(live map[string]*admin.ProviderView, saved []admin.TargetView) {
	if len(d.Form.Targets) == 0 {
		d.Form.Targets = []targetForm{{Weight: "1"}}
	}
	for i := range d.Form.Targets {
		t := &d.Form.Targets[i]
		t.Row, t.Index = "t"+strconv.Itoa(i), i
		t.Hint = hintFor(t.Row, t.Provider, live)
		for _, s := range saved {
			if s.Provider == t.Provider && s.UpstreamModel == t.UpstreamModel && s.Routable != nil {
				t.Hint.State, t.Hint.Reason = "not ready", s.Reason
				if *s.Routable {
					t.Hint.State, t.Hint.Reason = "ready", ""
				}
				break
			}
		}
	}
	d.NextRow = len(d.Form.Targets)
}

// hintFor is what a row says once provider is picked: its models and its
// readiness.
func hintFor(row, provider string, live map[string]*admin.ProviderView) modelHint {
	h := modelHint{Row: row, Provider: provider}
	p := live[provider]
	if p == nil {
		return h
	}
	h.Known = true
	h.Models, _ = catalog(p, nil)
	switch {
	case p.MetadataSource == store.MetadataUpstream && len(h.Models) > 0:
		h.Source = "discovered"
	case p.MetadataSource == store.MetadataUpstream:
		h.Source = "pending"
	case len(h.Models) > 0:
		h.Source = "configured"
	default:
		h.Source = "any"
	}
	h.State, h.Reason = providerState(p, "")
	return h
}

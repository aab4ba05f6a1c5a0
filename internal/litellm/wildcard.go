package litellm

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// LiteLLM wildcards and what the importer makes of them.
//
// A LiteLLM entry with model_name "openai/*" and model "openai/*" sends a
// request for "openai/gpt-4o" to that deployment as "gpt-4o"; several such
// entries share the requests. rolter's nearest concept is a provider group
// (design 000: "a group is effectively a wildcard route family"): a group
// with the slug "openai" whose members are the entries' providers, so the
// client keeps asking for "openai/gpt-4o" and each member receives
// "gpt-4o". Where the prefix cannot be a slug, or the slug belongs to a
// provider, the entries' providers are still created and reachable as
// "provider-slug/<model>", which the report says.
//
// model_name "*" catches every model LiteLLM has no other entry for.
// rolter has no catch-all address: the entry's provider is created, and the
// report names the "provider-slug/<model>" address that reaches it.
//
// Anything else with a '*' is one of LiteLLM's pattern routes (a partial
// wildcard, or a wildcard mapped onto one model); rolter matches addresses
// exactly, so such an entry is skipped with the reason. No entry ever
// becomes a route with upstream model "*".

// wildcard classifies e by its model_name and the model after the provider
// prefix: it sets e.Wildcard for a wildcard rolter maps, and returns why
// an entry with another '*' form is skipped ("" to import it).
func wildcard(e *Entry, upstream string) string {
	nameWild := strings.Contains(e.ModelName, "*")
	upWild := strings.Contains(upstream, "*")
	switch {
	case e.Model == "*":
		return `litellm_params.model "*" lets LiteLLM pick the provider from each request; rolter needs the provider: write e.g. openai/* with its api_base`
	case !nameWild && !upWild:
		return ""
	case !nameWild:
		return "litellm_params.model " + quoted(e.Model) + " is a wildcard but model_name is not; rolter routes a model_name to fixed upstream models"
	case upstream != "*" && upWild:
		return "model_name " + quoted(e.ModelName) + " and litellm_params.model " + quoted(e.Model) + " are a LiteLLM pattern route; rolter maps only prefix/* onto <provider>/* and * onto <provider>/*"
	case upstream != "*":
		return "model_name " + quoted(e.ModelName) + " is a wildcard sent to one model (" + quoted(e.Model) + "); rolter passes the requested model through and cannot send every model to one"
	case e.ModelName == "*":
		e.Wildcard = "*"
		return ""
	}
	prefix, ok := strings.CutSuffix(e.ModelName, "/*")
	if !ok || prefix == "" || strings.Contains(prefix, "*") {
		return "model_name " + quoted(e.ModelName) + " is a LiteLLM pattern; rolter maps only prefix/* (a group) and * (a provider address)"
	}
	e.Wildcard = prefix
	return ""
}

// quoted quotes a model string for a message, cut when long.
func quoted(s string) string {
	const maxLen = 80
	if len(s) > maxLen {
		cut := maxLen
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return strconv.Quote(s)
}

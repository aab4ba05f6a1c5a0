package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// routes is `rolter routes`: the public model names of a project.
func routes() *resource {
	common := []field{
		{flag: "strategy", key: "strategy", usage: "weighted (default), round_robin, least_busy or latency"},
		{flag: "target", key: "targets", kind: fArray, conv: targetsFlag,
			usage: "PROVIDER[:UPSTREAM_MODEL[:WEIGHT]][@PRIORITY] (repeat; on update the list replaces the route's; lower priority is preferred, default 0)"},
		{flag: "fallback", key: "fallbacks", kind: fArray, conv: fallbacksFlag,
			usage: "a route of the project tried when every attempt on this one failed (repeat, in order; on update the list replaces the route's, --fallback '' clears it)"},
		{flag: "context-fallback", key: "context_fallback",
			usage: "a route of the project with a larger context, for requests too long for this one ('' clears it)"},
		{flag: "rpm-limit", key: "rpm_limit", kind: fInt, usage: "requests per minute of all callers together (0: none)"},
		{flag: "tpm-limit", key: "tpm_limit", kind: fInt, usage: "tokens per minute of all callers together (0: none)"},
	}
	create := append([]field{{flag: "model", key: "model", usage: "the route's name: the model callers send"}}, common...)
	update := append([]field{{flag: "model", key: "model", usage: "rename the route"}}, common...)
	return &resource{
		name: "routes", singular: "route", scope: scopeProject, id: "MODEL", idField: "model",
		short: "public model names of a project and the providers behind them",
		coll:  func(a *app) string { return RoutesPath(a.org, a.project) },
		item:  func(a *app, id string) string { return RoutePath(a.org, a.project, id) },
		cols: []column{
			col("MODEL", "model"), col("STRATEGY", "strategy"), {header: "TARGETS", value: targetsText},
			col("RPM", "rpm_limit"), col("TPM", "tpm_limit"), {header: "FALLBACKS", value: fallbacksText},
		},
		create: create, update: update,
		examples: map[string]string{
			"list": "  rolter routes list\n  rolter routes list --project team-a",
			"get":  "  rolter routes get qwen3",
			"create": "  rolter routes create --model qwen3 --target my-vllm:Qwen/Qwen3-8B\n  rolter routes create --model qwen3 --target vllm-a:Qwen/Qwen3-8B:3 --target vllm-b:Qwen/Qwen3-8B:1\n" +
				"  rolter routes create --model qwen3 --target my-vllm:Qwen/Qwen3-8B --target openai:gpt-4o-mini@1 --fallback gpt-4o --context-fallback qwen3-long",
			"update": "  rolter routes update qwen3 --target my-vllm:Qwen/Qwen3-8B --rpm-limit 600",
			"delete": "  rolter routes delete qwen3",
		},
	}
}

// targetsFlag reads --target PROVIDER[:UPSTREAM_MODEL[:WEIGHT]][@PRIORITY].
// The provider is up to the first colon; a last part of digits is the
// weight, so an upstream model may hold colons itself (llama3:8b); a
// trailing @ and digits is the priority (an upstream model ending so
// needs -f).
func targetsFlag(_ *app, v any) (any, error) {
	var out []any
	for _, s := range v.([]string) {
		t := map[string]any{}
		if i := strings.LastIndex(s, "@"); i >= 0 {
			if p, err := strconv.Atoi(s[i+1:]); err == nil {
				t["priority"] = p
				s = s[:i]
			}
		}
		prov, rest, _ := strings.Cut(s, ":")
		if prov == "" {
			return nil, fmt.Errorf("%q: want PROVIDER[:UPSTREAM_MODEL[:WEIGHT]], e.g. my-vllm:Qwen/Qwen3-8B:1", s)
		}
		t["provider"] = prov
		if i := strings.LastIndex(rest, ":"); i >= 0 {
			if w, err := strconv.Atoi(rest[i+1:]); err == nil {
				t["weight"] = w
				rest = rest[:i]
			}
		} else if w, err := strconv.Atoi(rest); err == nil && rest != "" {
			return nil, fmt.Errorf("%q: %d reads as a weight without a model; write %s::%d, or -f for a numeric model name", s, w, prov, w)
		}
		if rest != "" {
			t["upstream_model"] = rest
		}
		out = append(out, t)
	}
	return out, nil
}

// targetsText shows targets as provider/upstream_model*weight.
func targetsText(m map[string]any) string {
	xs, _ := lookup(m, "targets").([]any)
	parts := make([]string, 0, len(xs))
	for _, x := range xs {
		t, _ := x.(map[string]any)
		s := text(t["provider"])
		if um := text(t["upstream_model"]); um != "" {
			s += ":" + um
		}
		if w := text(t["weight"]); w != "" && w != "1" {
			s += "*" + w
		}
		if p := text(t["priority"]); p != "" && p != "0" {
			s += "@" + p
		}
		if r, ok := t["routable"].(bool); ok && !r {
			s += "(down)"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ",")
}

// fallbacksFlag reads --fallback ROUTE (repeated); empty values are
// dropped, so --fallback ” clears the list on update.
func fallbacksFlag(_ *app, v any) (any, error) {
	out := []any{}
	for _, s := range v.([]string) {
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// fallbacksText shows a route's fallbacks in order, then its context
// fallback as ctx:ROUTE.
func fallbacksText(m map[string]any) string {
	xs, _ := lookup(m, "fallbacks").([]any)
	parts := make([]string, 0, len(xs)+1)
	for _, x := range xs {
		parts = append(parts, text(x))
	}
	if c := text(lookup(m, "context_fallback")); c != "" {
		parts = append(parts, "ctx:"+c)
	}
	return strings.Join(parts, ",")
}

// groups is `rolter groups`: several providers behind one slug.
func groups() *resource {
	common := []field{
		{flag: "name", key: "name", usage: "display name"},
		{flag: "slug", key: "slug", usage: "the address in slug/model (default: derived from --name)"},
		{flag: "strategy", key: "strategy", usage: "weighted (default), round_robin, least_busy or latency"},
		{flag: "member", key: "members", kind: fArray, conv: membersFlag,
			usage: "PROVIDER[:WEIGHT] (repeat; on update the list replaces the group's; model_map needs -f)"},
	}
	update := append(append([]field{}, common...), field{flag: "allow-slug-change", key: "?allow_slug_change", kind: fBool,
		usage: "allow --slug to change the slug (every slug/model address changes)"})
	return &resource{
		name: "groups", singular: "group", scope: scopeOrg, id: "SLUG", idField: "slug",
		short: "provider groups: several providers behind one slug",
		long: `Provider groups put several providers behind one address, slug/model.
"delete" takes a group out of routing and keeps its slug reserved;
"purge" (or delete --purge) removes it and frees the slug; it is refused
while virtual keys' allowlists name the slug (slug/*, slug/model), unless
--force, which removes those entries.`,
		coll: func(a *app) string { return GroupsPath(a.org) },
		item: func(a *app, id string) string { return GroupPath(a.org, id) },
		cols: []column{
			col("SLUG", "slug"), col("NAME", "name"), col("STRATEGY", "strategy"), {header: "MEMBERS", value: membersText},
			{header: "STATE", value: groupState},
		},
		create: common, update: update,
		del: deleteSpec{short: "take a group out of routing; its slug stays reserved", verb: "deleted",
			purge: true, purgeUsage: "remove it for good and free its slug (refused while keys' allowlists name it)", force: true},
		extra: func(a *app, r *resource) []*cobra.Command { return []*cobra.Command{a.purgeCmd(r)} },
		examples: map[string]string{
			"create": "  rolter groups create --name vllm-all --member vllm-msk --member vllm-nsk:2",
			"update": "  rolter groups update vllm-all --member vllm-msk",
			"delete": "  rolter groups delete vllm-all\n  rolter groups delete vllm-all --purge",
			"purge":  "  rolter groups purge vllm-all\n  rolter groups purge vllm-all --force",
		},
	}
}

// groupState is "deleted" for a soft-deleted group, else "".
func groupState(m map[string]any) string {
	if lookup(m, "deleted_at") != nil {
		return "deleted"
	}
	return ""
}

func membersFlag(_ *app, v any) (any, error) {
	var out []any
	for _, s := range v.([]string) {
		prov, w, hasW := strings.Cut(s, ":")
		if prov == "" {
			return nil, fmt.Errorf("%q: want PROVIDER[:WEIGHT]", s)
		}
		m := map[string]any{"provider": prov}
		if hasW {
			n, err := strconv.Atoi(w)
			if err != nil {
				return nil, fmt.Errorf("%q: the weight must be an integer", s)
			}
			m["weight"] = n
		}
		out = append(out, m)
	}
	return out, nil
}

func membersText(m map[string]any) string {
	xs, _ := lookup(m, "members").([]any)
	parts := make([]string, 0, len(xs))
	for _, x := range xs {
		mem, _ := x.(map[string]any)
		s := text(mem["provider"])
		if w := text(mem["weight"]); w != "" && w != "1" {
			s += "*" + w
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ",")
}

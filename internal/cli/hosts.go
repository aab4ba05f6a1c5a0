package cli

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/spf13/cobra"
)

// hosts is `rolter hosts`: the GPU boxes of the vLLM fleet (docs/fleet.md).
func hosts() *resource {
	recipe := []field{
		{flag: "recipe", key: "recipe", usage: "the recipe, a JSON or YAML file ({vllm: {model, source, vram_gb, disk_gb, args}})", conv: recipeFile},
		{flag: "notes", key: "notes", usage: "free text, e.g. rented for X, kill after"},
		{flag: "auto-apply", key: "auto_apply", kind: fBool, usage: "restart the box's vLLM on a new revision without an operator"},
		{flag: "port", key: "port", kind: fInt, usage: "the port the box's vLLM listens on"},
		{flag: "drain-timeout", key: "drain_timeout", usage: "how long a restart waits for requests in flight, e.g. 120s (default 120s)"},
	}
	create := append([]field{
		{flag: "ip", key: "ip", usage: "the box's address; it also identifies the box to the fleet"},
		{flag: "model-name", key: "model_name", usage: "the route the box serves: the name callers send"},
		{flag: "project", key: "project", usage: "the project of the route (default: default)"},
	}, recipe...)
	return &resource{
		name: "hosts", singular: "host", scope: scopeOrg, id: "ID", idField: "id",
		short: "GPU boxes of the vLLM fleet",
		long: `Hosts are the GPU boxes the fleet tells what to serve. A new host's api_key
(rh-...) is printed once, by "create". A host record is never deleted:
"delete" and "retire" both retire it. "apply" asks the box to restart on
the current revision, after draining it: it leaves routing at once and
restarts when its requests in flight finish (at most --drain-timeout).`,
		coll: func(a *app) string { return HostsPath(a.org) },
		item: func(a *app, id string) string { return HostPath(a.org, id) },
		cols: []column{
			col("ID", "id"), col("IP", "ip"), col("PORT", "port"), col("MODEL_NAME", "model_name"), col("STATE", "state"),
			col("PROVIDER", "provider"), col("SKEW", "skew"), col("LIVENESS", "liveness.class"),
		},
		create: create, update: recipe, secrets: []string{"api_key"},
		del: deleteSpec{short: "retire a host (the same as retire; the record stays)", verb: "retired"},
		extra: func(a *app, r *resource) []*cobra.Command {
			return []*cobra.Command{a.hostActionCmd(r, "retire", "retired", "deregister a host; its record stays, state retired"),
				a.hostApplyCmd(r)}
		},
		examples: map[string]string{
			"create": "  rolter hosts create --ip 10.0.0.5 --port 8000 --model-name qwen3 --recipe recipe.yaml",
			"update": "  rolter hosts update 1 --recipe recipe.yaml --auto-apply",
			"retire": "  rolter hosts retire 1",
			"apply":  "  rolter hosts apply 1\n  rolter hosts apply 2 --all-at-once",
		},
	}
}

func recipeFile(a *app, v any) (any, error) {
	return a.readBody("--recipe", v.(string))
}

// hostActionCmd is `hosts retire|apply ID`: POST .../hosts/{id}/ACTION.
func (a *app) hostActionCmd(r *resource, action, verb, short string) *cobra.Command {
	cmd := a.verbCmd(r, action, short, true)
	cmd.RunE = a.run(false, func(ctx context.Context, c *Client, _ *cobra.Command, args []string) error {
		var raw json.RawMessage
		if err := c.Do(ctx, http.MethodPost, HostPath(a.org, args[0])+"/"+action, nil, nil, &raw); err != nil {
			return err
		}
		return a.done(r.singular, args[0], verb, raw)
	})
	return cmd
}

// hostApplyCmd is `hosts apply ID [--all-at-once]`: the restart drains the
// host first; the gateway refuses to drain a pool's last serving host
// (409 would_drain_pool) unless --all-at-once (force).
func (a *app) hostApplyCmd(r *resource) *cobra.Command {
	cmd := a.hostActionCmd(r, "apply", "apply requested", "drain a host, then restart its box's vLLM on the current revision")
	var force bool
	cmd.Flags().BoolVar(&force, "all-at-once", false, "restart even if no other host of the pool serves (callers get 503 until it serves again)")
	cmd.Flags().BoolVar(&force, "force", false, "the same as --all-at-once")
	cmd.RunE = a.run(false, func(ctx context.Context, c *Client, _ *cobra.Command, args []string) error {
		path := HostPath(a.org, args[0]) + "/apply"
		if force {
			path += "?force=true"
		}
		var raw json.RawMessage
		if err := c.Do(ctx, http.MethodPost, path, nil, nil, &raw); err != nil {
			return err
		}
		return a.done(r.singular, args[0], "apply requested", raw)
	})
	return cmd
}

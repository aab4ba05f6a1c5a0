package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// providers is `rolter providers`: upstream endpoints with their key pools.
func providers() *resource {
	common := []field{
		{flag: "name", key: "name", usage: "display name"},
		{flag: "slug", key: "slug", usage: "the address in slug/model (default: derived from --name)"},
		{flag: "kind", key: "kind", usage: "openai, anthropic, vllm, sglang or llamacpp"},
		{flag: "base-url", key: "base_url", usage: "the upstream's API root, e.g. http://10.0.0.5:8000/v1"},
		{flag: "model", key: "models", kind: fArray, usage: "a model it serves (repeat the flag)"},
		{flag: "metadata-source", key: "metadata_source", usage: "configured (default) or upstream"},
		{flag: "context-limit", key: "context_limit", kind: fInt, usage: "context window in tokens"},
		{flag: "first-byte-timeout", key: "first_byte_timeout", usage: "per attempt, e.g. 60s (default: the gateway's)"},
		{flag: "idle-timeout", key: "idle_timeout", usage: "between stream events, e.g. 30s"},
		{flag: "forward-header", key: "forward_headers", kind: fArray, usage: "a client header to pass upstream, or a prefix X-Trace-* (repeat)"},
		{flag: "prices", key: "prices", usage: "USD per million tokens, INPUT/OUTPUT, e.g. 0.15/0.60", conv: pricesFlag},
	}
	create := append(append([]field{}, common...),
		field{flag: "key-env", key: "keys", kind: fArray, conv: keysFromEnv,
			usage: "an upstream key, read from this environment variable (repeat for a pool)"},
		field{flag: "key-stdin", key: "", kind: fBool, usage: "read upstream keys from standard input, one per line"})
	update := append(append([]field{}, common...),
		field{flag: "no-prices", key: "prices", kind: fBool, conv: null, usage: "remove the prices"},
		field{flag: "allow-slug-change", key: "?allow_slug_change", kind: fBool,
			usage: "allow --slug to change the slug (every slug/model address changes)"})
	return &resource{
		name: "providers", singular: "provider", scope: scopeOrg, id: "SLUG", idField: "slug",
		short: "upstream endpoints (vLLM, OpenAI, ...) and their key pools",
		long: `Providers are the upstreams rolter sends requests to, addressed as slug/model.
Their key secrets are never shown: give them with --key-env NAME (the
variable's value is sent) or --key-stdin, never as a flag value.
"delete" takes a provider out of routing and keeps its slug reserved;
"purge" (or delete --purge) removes it and frees the slug; it is refused
while virtual keys' allowlists name the slug (slug/*, slug/model), unless
--force, which removes those entries.`,
		coll: func(a *app) string { return ProvidersPath(a.org) },
		item: func(a *app, id string) string { return ProviderPath(a.org, id) },
		cols: []column{
			col("SLUG", "slug"), col("NAME", "name"), col("KIND", "kind"), col("BASE_URL", "base_url"),
			col("MODELS", "models"), {header: "KEYS", value: count("keys")}, {header: "STATE", value: providerState},
		},
		create: create, update: update,
		createHook: keysFromStdin,
		del: deleteSpec{short: "take a provider out of routing; its slug stays reserved", verb: "deleted",
			purge: true, purgeUsage: "remove it for good and free its slug (refused while routes, groups or keys' allowlists name it)", force: true},
		extra: func(a *app, r *resource) []*cobra.Command {
			return []*cobra.Command{a.purgeCmd(r), a.providerKeysCmd()}
		},
		examples: map[string]string{
			"list": "  rolter providers list\n  rolter providers list -o yaml",
			"get":  "  rolter providers get my-vllm",
			"create": `  export VLLM_KEY=sk-...
  rolter providers create --name "My vLLM" --kind vllm --base-url http://10.0.0.5:8000/v1 \
    --model Qwen/Qwen3-8B --key-env VLLM_KEY
  rolter providers create -f provider.yaml`,
			"update": "  rolter providers update my-vllm --base-url http://10.0.0.6:8000/v1\n  rolter providers update my-vllm --slug vllm-msk --allow-slug-change",
			"delete": "  rolter providers delete my-vllm\n  rolter providers delete my-vllm --purge",
			"purge":  "  rolter providers purge my-vllm\n  rolter providers purge my-vllm --force",
		},
	}
}

// providerState is "deleted" for a soft-deleted provider, else its live
// readiness as this replica knows it.
func providerState(m map[string]any) string {
	if lookup(m, "deleted_at") != nil {
		return "deleted"
	}
	return text(lookup(m, "readiness.state"))
}

func count(path string) func(map[string]any) string {
	return func(m map[string]any) string {
		xs, _ := lookup(m, path).([]any)
		return strconv.Itoa(len(xs))
	}
}

// null sends JSON null: "remove this" in a PATCH.
func null(*app, any) (any, error) { return nil, nil }

func pricesFlag(_ *app, v any) (any, error) {
	in, out, ok := strings.Cut(v.(string), "/")
	if !ok || strings.TrimSpace(in) == "" || strings.TrimSpace(out) == "" {
		return nil, fmt.Errorf("want INPUT/OUTPUT in USD per million tokens, e.g. 0.15/0.60")
	}
	// Sent as strings: the API reads them as exact decimals.
	return map[string]any{"input": strings.TrimSpace(in), "output": strings.TrimSpace(out)}, nil
}

func keysFromEnv(a *app, v any) (any, error) {
	var keys []any
	for _, name := range v.([]string) {
		s, err := a.envSecret("key-env", name)
		if err != nil {
			return nil, err
		}
		// The variable's name goes with the key as its ref, so that
		// rolter export names it again.
		keys = append(keys, map[string]any{"secret": s, "ref": name})
	}
	return keys, nil
}

func keysFromStdin(a *app, cmd *cobra.Command, body map[string]any) error {
	if on, _ := cmd.Flags().GetBool("key-stdin"); !on {
		return nil
	}
	secrets, err := a.stdinSecrets("key-stdin")
	if err != nil {
		return err
	}
	keys, _ := body["keys"].([]any)
	for _, s := range secrets {
		keys = append(keys, map[string]any{"secret": s})
	}
	body["keys"] = keys
	return nil
}

// purgeCmd is `providers purge SLUG` (and groups'): delete --purge.
func (a *app) purgeCmd(r *resource) *cobra.Command {
	cmd := a.verbCmd(r, "purge", "remove a "+r.singular+" for good and free its slug", true)
	cmd.Flags().Bool("force", false, forceUsage)
	cmd.RunE = a.run(false, func(ctx context.Context, c *Client, cmd *cobra.Command, args []string) error {
		return a.delete(ctx, c, r, args[0], true, purgeForce(r, cmd))
	})
	return cmd
}

// providerKeysCmd is `providers keys list|add|delete`: a provider's pool
// of upstream keys. Their secrets are never shown, not even on add.
func (a *app) providerKeysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "a provider's pool of upstream keys (secrets never shown)",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cols := []column{col("ID", "id"), col("WEIGHT", "weight"), col("REF", "ref"), col("CREATED", "created_at")}
	list := &cobra.Command{Use: "list SLUG", Short: "list a provider's keys", Args: exactArgs("SLUG"),
		Example: "  rolter providers keys list my-vllm"}
	list.RunE = a.run(false, func(ctx context.Context, c *Client, _ *cobra.Command, args []string) error {
		var page struct {
			Data []json.RawMessage `json:"data"`
		}
		if err := c.Do(ctx, "GET", ProviderKeysPath(a.org, args[0]), nil, nil, &page); err != nil {
			return err
		}
		return writeList(a.env.Stdout, a.output, page.Data, cols)
	})
	add := &cobra.Command{Use: "add SLUG", Short: "add an upstream key to the pool", Args: exactArgs("SLUG"),
		Example: "  VLLM_KEY_2=sk-... rolter providers keys add my-vllm --key-env VLLM_KEY_2"}
	add.Flags().String("key-env", "", "read the key from this environment variable")
	add.Flags().Bool("key-stdin", false, "read the key from standard input")
	add.Flags().Int("weight", 1, "its share of the provider's requests (0-1000000)")
	add.RunE = a.run(false, func(ctx context.Context, c *Client, cmd *cobra.Command, args []string) error {
		env, _ := cmd.Flags().GetString("key-env")
		fromStdin, _ := cmd.Flags().GetBool("key-stdin")
		var s string
		switch {
		case env != "" && fromStdin:
			return usageErrorf("give --key-env or --key-stdin, not both")
		case fromStdin:
			ss, err := a.stdinSecrets("key-stdin")
			if err != nil {
				return err
			}
			if len(ss) != 1 {
				return usageErrorf("--key-stdin: want one key, got %d lines", len(ss))
			}
			s = ss[0]
		default:
			var err error
			if s, err = a.envSecret("key-env", env); err != nil {
				return err
			}
		}
		weight, _ := cmd.Flags().GetInt("weight")
		body := map[string]any{"secret": s, "weight": weight}
		if env != "" {
			body["ref"] = env // named again by rolter export
		}
		raw, err := Create[json.RawMessage](ctx, c, ProviderKeysPath(a.org, args[0]), nil, body)
		if err != nil {
			return err
		}
		return writeObject(a.env.Stdout, a.output, raw)
	})
	upd := &cobra.Command{Use: "update SLUG ID", Short: "reweight a key in place (0 keeps it out of rotation)", Args: exactArgs("SLUG", "ID"),
		Example: "  rolter providers keys update my-vllm 3 --weight 0"}
	upd.Flags().Int("weight", 1, "its share of the provider's requests (0-1000000)")
	upd.RunE = a.run(false, func(ctx context.Context, c *Client, cmd *cobra.Command, args []string) error {
		if !cmd.Flags().Changed("weight") {
			return usageErrorf("nothing to change: give --weight")
		}
		weight, _ := cmd.Flags().GetInt("weight")
		raw, err := Update[json.RawMessage](ctx, c, ProviderKeysPath(a.org, args[0])+seg(args[1]), nil, map[string]any{"weight": weight})
		if err != nil {
			return err
		}
		return writeObject(a.env.Stdout, a.output, raw)
	})
	del := &cobra.Command{Use: "delete SLUG ID", Short: "remove a key from the pool", Args: exactArgs("SLUG", "ID"),
		Example: "  rolter providers keys delete my-vllm 3"}
	del.RunE = a.run(false, func(ctx context.Context, c *Client, _ *cobra.Command, args []string) error {
		raw, err := Delete(ctx, c, ProviderKeysPath(a.org, args[0])+seg(args[1]), nil)
		if err != nil {
			return err
		}
		return a.done("provider key", args[1], "deleted", raw)
	})
	cmd.AddCommand(list, add, upd, del)
	return cmd
}

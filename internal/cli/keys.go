package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/spf13/cobra"
)

// keys is `rolter keys`: the virtual keys callers use (rk-...).
func keys() *resource {
	common := []field{
		{flag: "name", key: "name", usage: "who or what uses the key"},
		{flag: "models", key: "models", kind: fList, usage: "the models it may call, comma-separated or repeated (none: every model)"},
		{flag: "rpm-limit", key: "rpm_limit", kind: fInt, usage: "requests per minute (0: none)"},
		{flag: "tpm-limit", key: "tpm_limit", kind: fInt, usage: "tokens per minute (0: none)"},
		{flag: "budget", key: "budget", usage: "USD per period, AMOUNT/PERIOD with period day, week or month, e.g. 50/month", conv: budgetFlag},
		{flag: "expires-at", key: "expires_at", usage: "RFC 3339 time after which it stops working"},
	}
	update := append(append([]field{}, common...),
		field{flag: "no-budget", key: "budget", kind: fBool, conv: null, usage: "remove the budget"},
		field{flag: "no-expiry", key: "expires_at", kind: fBool, conv: null, usage: "remove the expiry"},
		field{flag: "all-models", key: "models", kind: fBool, conv: emptyList, usage: "allow every model"})
	return &resource{
		name: "keys", singular: "key", scope: scopeProject, id: "ID", idField: "id",
		short: "virtual keys (rk-...) of a project: what callers authenticate with",
		long: `Virtual keys are what callers send as their bearer token. A key's secret is
printed once, by "create", on its own line marked "shown once"; it is stored
hashed and no command can show it again.
"revoke" (or "delete") stops a key at once and keeps its record;
"delete --purge" then removes a revoked key for good.`,
		coll: func(a *app) string { return KeysPath(a.org, a.project) },
		item: func(a *app, id string) string { return KeyPath(a.org, a.project, id) },
		cols: []column{
			col("ID", "id"), col("NAME", "name"), col("PREFIX", "prefix"), col("MODELS", "models"),
			col("RPM", "rpm_limit"), col("TPM", "tpm_limit"), col("EXPIRES", "expires_at"), col("REVOKED", "revoked_at"),
		},
		create: common, update: update, secrets: []string{"secret"},
		del: deleteSpec{short: "revoke a key (the same as revoke); --purge removes a revoked one", verb: "revoked",
			purge: true, purgeUsage: "remove an already revoked key for good"},
		extra: func(a *app, r *resource) []*cobra.Command { return []*cobra.Command{a.revokeCmd(r)} },
		examples: map[string]string{
			"list":   "  rolter keys list --project team-a",
			"create": "  rolter keys create --name alice --models qwen3\n  rolter keys create --name ci --models qwen3 --rpm-limit 60 --budget 20/month -o json",
			"update": "  rolter keys update 2 --models qwen3,my-vllm/*\n  rolter keys update 2 --no-expiry",
			"delete": "  rolter keys delete 2\n  rolter keys delete 2 --purge",
			"revoke": "  rolter keys revoke 2",
		},
	}
}

func budgetFlag(_ *app, v any) (any, error) {
	amount, period, ok := strings.Cut(v.(string), "/")
	if !ok || amount == "" || period == "" {
		return nil, fmt.Errorf("want AMOUNT/PERIOD, e.g. 50/month (period day, week or month)")
	}
	return map[string]any{"amount": amount, "period": period}, nil
}

func emptyList(*app, any) (any, error) { return []string{}, nil }

// revokeCmd is `keys revoke ID`, the API's DELETE.
func (a *app) revokeCmd(r *resource) *cobra.Command {
	cmd := a.verbCmd(r, "revoke", "stop a "+r.singular+" at once; its record stays", true)
	cmd.RunE = a.run(false, func(ctx context.Context, c *Client, _ *cobra.Command, args []string) error {
		return a.delete(ctx, c, r, args[0], false, false)
	})
	return cmd
}

// tokens is `rolter tokens`: admin tokens (ra-...). Only a global token
// may manage them.
func tokens() *resource {
	return &resource{
		name: "tokens", singular: "token", scope: scopeGlobal, id: "ID", idField: "id",
		short: "admin tokens (ra-...), global or scoped to one org",
		long: `Admin tokens open the admin API. Only a global token may list, create or
revoke them. A new token's secret is printed once, by "create".`,
		coll: func(*app) string { return TokensPath() },
		item: func(_ *app, id string) string { return TokenPath(id) },
		cols: []column{
			col("ID", "id"), col("NAME", "name"), {header: "SCOPE", value: scopeText}, col("SOURCE", "source"),
			col("PREFIX", "prefix"), col("EXPIRES", "expires_at"), col("REVOKED", "revoked_at"),
		},
		create: []field{
			{flag: "name", key: "name", usage: "who or what uses the token"},
			{flag: "scope", key: "scope", usage: `"global", or org:NAME for one org`, conv: scopeFlag},
			{flag: "expires-at", key: "expires_at", usage: "RFC 3339 time after which it stops working"},
		},
		noUpdate: true, secrets: []string{"secret"},
		del:   deleteSpec{short: "revoke a token (its record stays)", verb: "revoked"},
		extra: func(a *app, r *resource) []*cobra.Command { return []*cobra.Command{a.revokeCmd(r)} },
		examples: map[string]string{
			"create": "  rolter tokens create --name ci --scope global\n  rolter tokens create --name team-a --scope org:team-a",
			"delete": "  rolter tokens delete 3",
			"revoke": "  rolter tokens revoke 2",
		},
	}
}

func scopeFlag(_ *app, v any) (any, error) {
	s := v.(string)
	if s == "global" {
		return s, nil
	}
	if org, ok := strings.CutPrefix(s, "org:"); ok && org != "" {
		return map[string]any{"org": org}, nil
	}
	return nil, fmt.Errorf(`want "global" or org:NAME`)
}

func scopeText(m map[string]any) string {
	if org := text(lookup(m, "scope.org")); org != "" {
		return "org:" + org
	}
	return text(lookup(m, "scope"))
}

// fleetKeys is `rolter fleet-keys`: what GPU boxes' agents authenticate
// with (rf-...).
func fleetKeys() *resource {
	return &resource{
		name: "fleet-keys", singular: "fleet key", scope: scopeOrg, id: "ID", idField: "id",
		short: "fleet keys (rf-...) of the GPU boxes' agents",
		long: `Fleet keys let "rolter agent" on a GPU box fetch its assignment. A new key's
secret is printed once, by "create"; at most two are live (rotation).
The API has no call to read one key or to change one: "get" picks it out
of the list, and there is no "update".`,
		coll:     func(a *app) string { return FleetKeysPath(a.org) },
		item:     func(a *app, id string) string { return FleetKeyPath(a.org, id) },
		cols:     []column{col("ID", "id"), col("NAME", "name"), col("PREFIX", "prefix"), col("CREATED", "created_at"), col("REVOKED", "revoked_at")},
		create:   []field{{flag: "name", key: "name", usage: "e.g. the box template it goes into"}},
		get:      getFleetKey,
		noUpdate: true, secrets: []string{"secret"},
		del:   deleteSpec{short: "revoke a fleet key (its record stays)", verb: "revoked"},
		extra: func(a *app, r *resource) []*cobra.Command { return []*cobra.Command{a.revokeCmd(r)} },
		examples: map[string]string{
			"create": "  rolter fleet-keys create --name gpu-template-2026-11",
			"delete": "  rolter fleet-keys delete 1",
			"revoke": "  rolter fleet-keys revoke 2",
		},
	}
}

// getFleetKey picks one fleet key out of the org's list: the API has no
// GET of one (a list of fleet keys is short: two live at most, plus the
// revoked ones).
func getFleetKey(ctx context.Context, a *app, c *Client, id string) (json.RawMessage, error) {
	items, _, err := List[json.RawMessage](ctx, c, FleetKeysPath(a.org), nil, 100000)
	if err != nil {
		return nil, err
	}
	for _, raw := range items {
		m, err := decodeObject(raw)
		if err == nil && text(m["id"]) == id {
			return raw, nil
		}
	}
	return nil, &APIError{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf("fleet key %s not found in org %s", id, a.org)}
}

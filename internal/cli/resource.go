package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/spf13/cobra"
)

// scopeKind is where a resource lives, and so which of --org and
// --project its commands take.
type scopeKind int

const (
	scopeGlobal  scopeKind = iota // /tokens, /orgs
	scopeOrg                      // /orgs/{org}/...
	scopeProject                  // /orgs/{org}/projects/{project}/...
)

// resource describes one admin API collection; resourceCmd turns it into
// `rolter NAME list|get|create|update|delete` and its actions.
type resource struct {
	name     string // the command: "providers"
	singular string // in messages: "provider"
	short    string
	long     string
	scope    scopeKind
	id       string // the argument naming one: "SLUG"
	idField  string // the field that holds it in a view: "slug"
	coll     func(a *app) string
	item     func(a *app, id string) string
	cols     []column
	// create and update are the flags of those commands; a nil list with
	// noCreate or noUpdate set means the API has no such call.
	create, update     []field
	noCreate, noUpdate bool
	// createHook adds to a create's body what one flag cannot say alone
	// (secrets read from the environment or stdin).
	createHook func(a *app, cmd *cobra.Command, body map[string]any) error
	// get replaces GET item for a resource the API has no such call for.
	get func(ctx context.Context, a *app, c *Client, id string) (json.RawMessage, error)
	// secrets are the fields a create answers once (secret, api_key).
	secrets []string
	del     deleteSpec
	// extra are the resource's actions (keys revoke, hosts retire, ...).
	extra    func(a *app, r *resource) []*cobra.Command
	examples map[string]string // by verb
}

// deleteSpec is what the API's DELETE means for a resource.
type deleteSpec struct {
	short      string
	verb       string // past tense for the message: "deleted", "revoked"
	purge      bool   // the API takes ?purge=true
	purgeUsage string
	// force: a purge takes ?force=true (providers and groups: purge even
	// while keys' allowlists name the slug, removing those entries).
	force bool
}

// forceUsage is the help of a purge's --force.
const forceUsage = "purge even while virtual keys' allowlists name the slug, removing those entries (a key left with none is revoked)"

// purgeForce reads --force where r's purge takes it.
func purgeForce(r *resource, cmd *cobra.Command) bool {
	if !r.del.force {
		return false
	}
	f, _ := cmd.Flags().GetBool("force")
	return f
}

func (a *app) resourceCmd(r *resource) *cobra.Command {
	cmd := &cobra.Command{
		Use:   r.name,
		Short: r.short,
		Long:  r.long,
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	a.connFlags(cmd, r.scope >= scopeOrg, r.scope == scopeProject)
	cmd.AddCommand(a.listCmd(r))
	cmd.AddCommand(a.getCmd(r))
	if !r.noCreate {
		cmd.AddCommand(a.createCmd(r))
	}
	if !r.noUpdate {
		cmd.AddCommand(a.updateCmd(r))
	}
	cmd.AddCommand(a.deleteCmd(r))
	if r.extra != nil {
		cmd.AddCommand(r.extra(a, r)...)
	}
	return cmd
}

// verbCmd is the command for one verb on r, with its example: on the
// collection, or, with onItem, on one item named by the id argument,
// which the shell completes from the list.
func (a *app) verbCmd(r *resource, verb, short string, onItem bool) *cobra.Command {
	cmd := &cobra.Command{Use: verb, Short: short, Args: noArgs, Example: r.examples[verb]}
	if onItem {
		cmd.Use += " " + r.id
		cmd.Args = exactArgs(r.id)
		cmd.ValidArgsFunction = a.completeIDs(r)
	}
	return cmd
}

func (a *app) listCmd(r *resource) *cobra.Command {
	cmd := a.verbCmd(r, "list", "list the "+r.name+", every page", false)
	cmd.Flags().IntVar(&a.limit, "limit", 1000, "print at most this many; a note on stderr says when more exist")
	cmd.RunE = a.run(false, func(ctx context.Context, c *Client, cmd *cobra.Command, _ []string) error {
		return a.printList(ctx, c, cmd, r.coll(a), nil, r.cols)
	})
	return cmd
}

// printList reads a whole list (up to --limit) and prints it.
func (a *app) printList(ctx context.Context, c *Client, cmd *cobra.Command, path string, query url.Values, cols []column) error {
	if a.limit < 1 {
		return usageErrorf("--limit must be at least 1")
	}
	items, more, err := List[json.RawMessage](ctx, c, path, query, a.limit)
	if err != nil {
		return err
	}
	if err := writeList(a.env.Stdout, a.output, items, cols); err != nil {
		return err
	}
	if more {
		fmt.Fprintf(a.env.Stderr, "%s: showing the first %d; more exist (raise --limit, or filter)\n", cmd.CommandPath(), a.limit)
	}
	return nil
}

func (a *app) getCmd(r *resource) *cobra.Command {
	cmd := a.verbCmd(r, "get", "show one "+r.singular, true)
	cmd.RunE = a.run(false, func(ctx context.Context, c *Client, _ *cobra.Command, args []string) error {
		var (
			raw json.RawMessage
			err error
		)
		if r.get != nil {
			raw, err = r.get(ctx, a, c, args[0])
		} else {
			raw, err = Get[json.RawMessage](ctx, c, r.item(a, args[0]), nil)
		}
		if err != nil {
			return err
		}
		return writeObject(a.env.Stdout, a.output, raw)
	})
	return cmd
}

func (a *app) createCmd(r *resource) *cobra.Command {
	cmd := a.verbCmd(r, "create", "create a "+r.singular+" from flags or -f FILE", false)
	registerBody(cmd, r.create)
	cmd.RunE = a.run(false, func(ctx context.Context, c *Client, cmd *cobra.Command, _ []string) error {
		body, query, err := a.body(cmd, r.create)
		if err != nil {
			return err
		}
		if r.createHook != nil {
			if err := r.createHook(a, cmd, body); err != nil {
				return err
			}
		}
		raw, err := Create[json.RawMessage](ctx, c, r.coll(a), query, body)
		if err != nil {
			return err
		}
		return writeObject(a.env.Stdout, a.output, raw, r.secrets...)
	})
	return cmd
}

func (a *app) updateCmd(r *resource) *cobra.Command {
	cmd := a.verbCmd(r, "update", "change a "+r.singular+": only the fields given change", true)
	registerBody(cmd, r.update)
	cmd.RunE = a.run(false, func(ctx context.Context, c *Client, cmd *cobra.Command, args []string) error {
		body, query, err := a.body(cmd, r.update)
		if err != nil {
			return err
		}
		if len(body) == 0 {
			return usageErrorf("nothing to change: give a flag or -f FILE; see %s --help", cmd.CommandPath())
		}
		raw, err := Update[json.RawMessage](ctx, c, r.item(a, args[0]), query, body)
		if err != nil {
			return err
		}
		if err := writeObject(a.env.Stdout, a.output, raw); err != nil {
			return err
		}
		a.printWarnings(raw)
		return nil
	})
	return cmd
}

func (a *app) deleteCmd(r *resource) *cobra.Command {
	short := r.del.short
	if short == "" {
		short = "delete a " + r.singular
	}
	cmd := a.verbCmd(r, "delete", short, true)
	if r.del.purge {
		cmd.Flags().Bool("purge", false, r.del.purgeUsage)
	}
	if r.del.force {
		cmd.Flags().Bool("force", false, "with --purge: "+forceUsage)
	}
	cmd.RunE = a.run(false, func(ctx context.Context, c *Client, cmd *cobra.Command, args []string) error {
		purge := false
		if r.del.purge {
			purge, _ = cmd.Flags().GetBool("purge")
		}
		force := purgeForce(r, cmd)
		if force && !purge {
			return usageErrorf("--force applies only to a purge: add --purge")
		}
		return a.delete(ctx, c, r, args[0], purge, force)
	})
	return cmd
}

// delete sends the API's DELETE for one resource and says what it did.
func (a *app) delete(ctx context.Context, c *Client, r *resource, id string, purge, force bool) error {
	var q url.Values
	verb := r.del.verb
	if verb == "" {
		verb = "deleted"
	}
	if purge {
		q, verb = url.Values{"purge": {"true"}}, "purged"
	}
	if force {
		q.Set("force", "true")
	}
	raw, err := Delete(ctx, c, r.item(a, id), q)
	if err != nil {
		return err
	}
	return a.done(r.singular, id, verb, raw)
}

// done reports a write that changed a resource's state: the resource as
// it is now when the API answered it and the format is for scripts, else
// one line for a person.
func (a *app) done(what, id, verb string, raw json.RawMessage) error {
	if a.output != formatTable {
		if raw == nil {
			return nil
		}
		return writeObject(a.env.Stdout, a.output, raw)
	}
	fmt.Fprintf(a.env.Stdout, "%s %s %s\n", what, id, verb)
	return nil
}

// printWarnings repeats on stderr the warnings an answer carries (a
// changed slug), which a table could scroll past.
func (a *app) printWarnings(raw json.RawMessage) {
	var v struct {
		Warnings []string `json:"warnings"`
	}
	if json.Unmarshal(raw, &v) == nil {
		for _, w := range v.Warnings {
			fmt.Fprintf(a.env.Stderr, "warning: %s\n", w)
		}
	}
}

// completeIDs completes a resource's id argument from the gateway's list
// (first page only: completion must stay quick).
func (a *app) completeIDs(r *resource) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 || r.idField == "" {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := a.connect(cmd)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), a.timeoutOr(5))
		defer cancel()
		items, _, err := List[map[string]any](ctx, c, r.coll(a), nil, 200)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ids := make([]string, 0, len(items))
		for _, m := range items {
			ids = append(ids, text(m[r.idField]))
		}
		return ids, cobra.ShellCompDirectiveNoFileComp
	}
}

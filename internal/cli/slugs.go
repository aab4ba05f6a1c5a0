package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

// errSlugTaken is `slugs check` finding the slug claimed: exit 4, as for
// the 409 a create with that slug would get.
var errSlugTaken = errors.New("the slug is taken")

// slugsCmd is `rolter slugs check SLUG`.
func (a *app) slugsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "slugs",
		Short: "check whether a provider or group slug is free",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	a.connFlags(cmd, true, false)
	check := &cobra.Command{
		Use:   "check SLUG",
		Short: "say whether SLUG is free in the org, and the next free one if not (exit 4 when taken)",
		Args:  exactArgs("SLUG"),
		Example: `  rolter slugs check my-vllm
  rolter slugs check my-vllm || echo "taken"`,
	}
	check.RunE = a.run(false, func(ctx context.Context, c *Client, cmd *cobra.Command, args []string) error {
		raw, err := Get[json.RawMessage](ctx, c, SlugPath(a.org, args[0]), nil)
		if err != nil {
			return err
		}
		var v struct {
			Slug       string `json:"slug"`
			Available  bool   `json:"available"`
			Suggestion string `json:"suggestion"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return &ConnError{Msg: "unexpected slug check answer", Err: err}
		}
		if a.output != formatTable {
			if err := writeObject(a.env.Stdout, a.output, raw); err != nil {
				return err
			}
		} else if v.Available {
			fmt.Fprintf(a.env.Stdout, "%s is available\n", v.Slug)
		} else {
			fmt.Fprintf(a.env.Stdout, "%s is taken; the next free one is %s\n", v.Slug, v.Suggestion)
		}
		if !v.Available {
			return errSlugTaken
		}
		return nil
	})
	cmd.AddCommand(check)
	return cmd
}

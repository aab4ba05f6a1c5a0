package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/config"
)

// maxConfigFile bounds a config file apply reads: the API takes 8 MiB of
// JSON, and the YAML of a file is about as large as its JSON.
const maxConfigFile = 8 << 20

// maxApplyBody is the most JSON POST /apply takes (adminapi's bound): a
// file under maxConfigFile may convert to more (quotes, escapes), which is
// refused here with the file named rather than by the gateway.
const maxApplyBody = 8 << 20

// applyCmd is `rolter apply -f FILE`: the file is sent, secrets resolved
// from the environment, to POST /apply, where the gateway plans and applies
// it in one transaction; the plan comes back and is printed as a diff.
func (a *app) applyCmd() *cobra.Command {
	var (
		file          string
		dryRun, prune bool
	)
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "make the gateway match a config file: print the plan as a diff and apply it, all or nothing",
		Long: `Apply a rolter config file (the format of serve --config, docs/cli.md) to the
running gateway: every entry is created, or written over the existing one,
through the admin API's own checks, in one transaction. The plan is printed
as a diff: + create, ~ update (with the changed fields), = unchanged, and
with --prune, - delete. A second run of the same file changes nothing.

Provider key secrets are environment references (os.environ/NAME, ${NAME}
or secret_env: NAME), read here and never printed. --dry-run needs none of
them: it lists those unset and plans without them.`,
		Example: `  rolter apply -f rolter.yaml --dry-run
  rolter apply -f rolter.yaml
  rolter export | rolter apply -f - --dry-run`,
		Args: noArgs,
	}
	a.connFlags(cmd, false, false)
	cmd.Flags().StringVarP(&file, "file", "f", "", "the config file; - is stdin")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan and change nothing (needs no secrets)")
	cmd.Flags().BoolVar(&prune, "prune", false, "also delete what the file's orgs hold and the file does not")
	cmd.RunE = a.run(false, func(ctx context.Context, c *Client, _ *cobra.Command, _ []string) error {
		if file == "" {
			return usageErrorf("-f FILE is required (- reads standard input)")
		}
		b, err := a.readFile("-f", file, maxConfigFile)
		if err != nil {
			return err
		}
		lookup := func(k string) (string, bool) { v := a.env.Getenv(k); return v, v != "" }
		f, unset, err := config.ParseWith(b, config.ParseOptions{Lookup: lookup, AllowUnset: true})
		if err != nil {
			return usageErrorf("-f %s: %v", file, err)
		}
		if len(unset) > 0 && !dryRun {
			var msg strings.Builder
			msg.WriteString("environment variables are not set (--dry-run plans without them):")
			for _, u := range unset {
				fmt.Fprintf(&msg, "\n  %s: %s", u.Entry, u.Name)
			}
			return &UsageError{Msg: msg.String()}
		}
		body, err := requestBody(f.Desired())
		if err != nil {
			return err
		}
		if len(body) > maxApplyBody {
			return usageErrorf("-f %s: the file is %.1f MiB as JSON, over the %d MiB that POST /apply takes; apply it in parts (an org or a few projects at a time)",
				file, float64(len(body))/(1<<20), maxApplyBody>>20)
		}
		q := url.Values{}
		if dryRun {
			q.Set("dry_run", "true")
		}
		if prune {
			q.Set("prune", "true")
		}
		raw, err := c.DoRaw(ctx, http.MethodPost, ApplyPath(), q, body)
		if err != nil {
			return err
		}
		var res admin.ApplyResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return &ConnError{Msg: "unexpected apply answer", Err: err}
		}
		switch a.output {
		case formatJSON:
			err = writeJSON(a.env.Stdout, raw)
		case formatYAML:
			err = writeYAML(a.env.Stdout, raw)
		default:
			err = printPlan(a.env.Stdout, res, unset)
		}
		if err == nil && a.output != formatTable && len(unset) > 0 {
			printUnset(a.env.Stderr, unset)
		}
		return err
	})
	return cmd
}

// exportCmd is `rolter export`: GET /export written as a config file.
func (a *app) exportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export",
		Short: "write the gateway's state as a config file (no secrets), for rolter apply",
		Long: `Write every org the token may see as a rolter config file: providers with
their key pools (as environment references, never secrets), groups,
projects with routes and live virtual keys, and fleet hosts. Applying the
output to the same gateway changes nothing.

A pool key is written as the variable it was applied from; a key added
without one gets a placeholder (ORG_SLUG_KEY_N), listed on stderr: set
those before applying the file elsewhere. -o json writes the API's JSON.`,
		Example: `  rolter export > rolter.yaml
  rolter export | rolter apply -f - --dry-run`,
		Args: noArgs,
	}
	a.connFlags(cmd, false, false)
	cmd.RunE = a.run(false, func(ctx context.Context, c *Client, _ *cobra.Command, _ []string) error {
		raw, err := Get[json.RawMessage](ctx, c, ExportPath(), nil)
		if err != nil {
			return err
		}
		if a.output == formatJSON {
			return writeJSON(a.env.Stdout, raw)
		}
		var d admin.Desired
		if err := json.Unmarshal(raw, &d); err != nil {
			return &ConnError{Msg: "unexpected export answer", Err: err}
		}
		f, placeholders := config.FromDesired(d)
		out, err := config.Marshal(f)
		if err != nil {
			return err
		}
		if len(placeholders) > 0 {
			fmt.Fprintf(a.env.Stderr, "rolter export: %d pool keys were added without an environment reference; the file names them %s: set those before applying it\n",
				len(placeholders), strings.Join(placeholders, ", "))
		}
		_, err = a.env.Stdout.Write(out)
		return err
	})
	return cmd
}

// readFile reads path, or standard input for "-", up to limit bytes.
func (a *app) readFile(flag, path string, limit int64) ([]byte, error) {
	var (
		b   []byte
		err error
	)
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(a.env.Stdin, limit+1))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, usageErrorf("%s: %v", flag, err)
	}
	if int64(len(b)) > limit {
		return nil, usageErrorf("%s %s: over %d MiB", flag, path, limit>>20)
	}
	return b, nil
}

// requestBody is d as the API's JSON with the provider key secrets
// written out: they leave the process here, on purpose, for the gateway
// (a Secret marshals as "<secret>" everywhere else).
func requestBody(d admin.Desired) (json.RawMessage, error) {
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Orgs []map[string]json.RawMessage `json:"orgs"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	for oi, o := range d.Orgs {
		if len(o.Providers) == 0 {
			continue
		}
		var provs []map[string]any
		if err := json.Unmarshal(doc.Orgs[oi]["providers"], &provs); err != nil {
			return nil, err
		}
		for pi, p := range o.Providers {
			keys, _ := provs[pi]["keys"].([]any)
			for ki, k := range p.Keys {
				if m, ok := keys[ki].(map[string]any); ok && !k.Secret.IsZero() {
					m["secret"] = k.Secret.Reveal()
				}
			}
		}
		if doc.Orgs[oi]["providers"], err = json.Marshal(provs); err != nil {
			return nil, err
		}
	}
	return json.Marshal(doc)
}

// Plan marks, as in a diff.
var planMark = map[string]string{
	admin.ActionCreate:    "+",
	admin.ActionUpdate:    "~",
	admin.ActionUnchanged: "=",
	admin.ActionDelete:    "-",
}

// printPlan writes an apply's answer as a diff, one entry a line, the
// changed fields and notes of each under it, then the count, and the
// secrets created, each once, on its own line.
func printPlan(w io.Writer, res admin.ApplyResult, unset []config.Unset) error {
	if len(unset) > 0 {
		printUnset(w, unset)
		fmt.Fprintln(w)
	}
	kindW, nameW := 0, 0
	for _, c := range res.Changes {
		kindW, nameW = max(kindW, len(kindWord(c.Kind))), max(nameW, len(c.Name))
	}
	for _, c := range res.Changes {
		fmt.Fprintf(w, "%s %-*s  %-*s  %s\n", planMark[c.Action], kindW, kindWord(c.Kind), nameW, c.Name, c.Action)
		for _, f := range c.Fields {
			fmt.Fprintf(w, "      %s: %s -> %s\n", f.Field, orNone(f.Old), orNone(f.New))
		}
		for _, n := range c.Notes {
			fmt.Fprintf(w, "      note: %s\n", n)
		}
	}
	create, update, del, same := res.Count(admin.ActionCreate), res.Count(admin.ActionUpdate), res.Count(admin.ActionDelete), res.Count(admin.ActionUnchanged)
	fmt.Fprintln(w)
	switch {
	case !res.Changed():
		fmt.Fprintf(w, "No changes: the gateway matches the file (%d unchanged).\n", same)
	case res.DryRun:
		fmt.Fprintf(w, "Plan: %d to create, %d to update, %d to delete, %d unchanged. Dry run: nothing was changed.\n", create, update, del, same)
	default:
		fmt.Fprintf(w, "Applied: %d created, %d updated, %d deleted, %d unchanged, in one transaction.\n", create, update, del, same)
	}
	for _, c := range res.Changes {
		if c.Secret != "" {
			fmt.Fprintf(w, "%s %s secret (shown once): %s\n", kindWord(c.Kind), c.Name, c.Secret)
		}
	}
	return nil
}

func printUnset(w io.Writer, unset []config.Unset) {
	fmt.Fprintln(w, "Environment variables not set (their keys are planned without secrets):")
	for _, u := range unset {
		fmt.Fprintf(w, "  %s  %s\n", u.Name, u.Entry)
	}
}

// kindWord is a change's kind as a person reads it ("virtual key").
func kindWord(kind string) string { return strings.ReplaceAll(kind, "_", " ") }

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

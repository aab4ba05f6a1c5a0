// Package cli is rolter's admin command line: `rolter providers list`,
// `rolter keys create`, `rolter usage summary` and the rest, one command
// per resource and action of the admin API (docs/admin-api.md).
//
// It talks to a running gateway over the admin API only and never opens a
// store: the Client (client.go, list.go, paths.go) is a typed HTTP client
// of /admin/v1 that a later command (apply, export) reuses, with the API's
// one error shape decoded into APIError. The commands (one file per
// resource) turn flags or a -f file into request bodies, and the output
// (output.go, table.go) prints the answer as an aligned table, JSON or
// YAML. Exit codes are per class of failure (exit.go).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Env is what a command reads and writes besides its arguments, so that
// tests run commands in-process without touching the process's own
// environment or standard streams.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Getenv reads an environment variable; nil means os.Getenv.
	Getenv func(string) string
	// HTTPClient nil means a client of its own, whose idle connections
	// are closed when the command returns.
	HTTPClient *http.Client
	// Version, when set, is what rolter --version prints, as is.
	Version string
}

// DefaultServer is the gateway a command talks to without --server or
// ROLTER_URL: rolter serve's default listen address.
const DefaultServer = "http://127.0.0.1:4000"

// app holds one invocation's flags and what is built from them.
type app struct {
	env Env

	server, token, org, project, output string
	limit                               int
	timeout                             time.Duration

	client *Client
}

// errNoToken is a command run without an admin token.
var errNoToken = errors.New("no admin token: set ROLTER_ADMIN_TOKEN (or --token, which other users can see in ps)")

// Execute runs the rolter command line with args (without the program
// name) and returns the exit code. extra are commands of the binary that
// are not admin API calls (serve, import, ...): they are added to the
// root as they are.
func Execute(ctx context.Context, args []string, env Env, extra ...*cobra.Command) int {
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	if env.Stdin == nil {
		env.Stdin = strings.NewReader("")
	}
	a := &app{env: env}
	if env.HTTPClient == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		defer tr.CloseIdleConnections()
		a.env.HTTPClient = &http.Client{Transport: tr}
	}
	root := a.root(extra)
	if len(args) == 0 {
		root.SetOut(env.Stderr)
		_ = root.Usage()
		return ExitUsage
	}
	root.SetArgs(args)
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	name := "rolter"
	if cmd != nil {
		name = cmd.CommandPath()
	}
	printError(env.Stderr, name, err)
	return exitCode(err)
}

func (a *app) root(extra []*cobra.Command) *cobra.Command {
	root := &cobra.Command{
		Use:   "rolter",
		Short: "rolter — a self-hosted LLM gateway",
		Long: `rolter — a self-hosted LLM gateway.

"rolter serve" runs the gateway. The resource commands (providers, routes,
keys, ...) manage a running gateway through its admin API: they need its
address (--server, env ROLTER_URL, default ` + DefaultServer + `) and an
admin token (env ROLTER_ADMIN_TOKEN). See docs/cli.md.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Without a RunE and Args, cobra would answer a misspelt command
		// with the help text and exit 0.
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	if a.env.Version != "" {
		root.Version = a.env.Version
		root.SetVersionTemplate("{{.Version}}")
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &UsageError{Msg: err.Error()} })
	root.AddGroup(&cobra.Group{ID: "gateway", Title: "Running the gateway:"},
		&cobra.Group{ID: "admin", Title: "Managing a running gateway (admin API):"})
	for _, c := range extra {
		c.GroupID = "gateway"
		root.AddCommand(c)
	}
	for _, c := range a.resourceCommands() {
		c.GroupID = "admin"
		root.AddCommand(c)
	}
	root.CompletionOptions.HiddenDefaultCmd = false
	return root
}

// resourceCommands are the admin API commands, in help order.
func (a *app) resourceCommands() []*cobra.Command {
	return []*cobra.Command{
		a.resourceCmd(providers()),
		a.resourceCmd(groups()),
		a.resourceCmd(routes()),
		a.resourceCmd(keys()),
		a.resourceCmd(hosts()),
		a.resourceCmd(fleetKeys()),
		a.resourceCmd(tokens()),
		a.resourceCmd(orgs()),
		a.resourceCmd(projects()),
		a.usageCmd(),
		a.slugsCmd(),
		a.applyCmd(),
		a.exportCmd(),
	}
}

// noArgs refuses arguments as a usage error, naming a misspelt command.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if cmd.HasSubCommands() {
		return usageErrorf("unknown command %q for %q; see %s --help", args[0], cmd.CommandPath(), cmd.CommandPath())
	}
	return usageErrorf("unexpected argument %q", args[0])
}

// exactArgs wants exactly the named arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usageErrorf("want %s; see %s --help", strings.Join(names, " "), cmd.CommandPath())
		}
		return nil
	}
}

// connFlags registers the connection and output flags on a group of
// commands; withOrg and withProject add the scope flags it needs.
func (a *app) connFlags(cmd *cobra.Command, withOrg, withProject bool) {
	pf := cmd.PersistentFlags()
	pf.StringVar(&a.server, "server", DefaultServer, "the gateway's base URL (env ROLTER_URL)")
	// No default shown: a token must not appear in --help output.
	pf.StringVar(&a.token, "token", "", "admin token (env ROLTER_ADMIN_TOKEN, preferred: a flag shows in ps)")
	pf.StringVarP(&a.output, "output", "o", formatTable, "output format: table, json or yaml")
	pf.DurationVar(&a.timeout, "timeout", time.Minute, "how long the whole command may take")
	if withOrg {
		pf.StringVar(&a.org, "org", "default", "the org")
	}
	if withProject {
		pf.StringVar(&a.project, "project", "default", "the project")
	}
}

// connect resolves the connection flags against the environment and
// builds the client; every command that calls the API starts with it.
func (a *app) connect(cmd *cobra.Command) (*Client, error) {
	if a.client != nil {
		return a.client, nil
	}
	if !cmd.Flags().Changed("server") {
		if v := strings.TrimSpace(a.env.Getenv("ROLTER_URL")); v != "" {
			a.server = v
		}
	}
	if !cmd.Flags().Changed("token") {
		a.token = a.env.Getenv("ROLTER_ADMIN_TOKEN")
	}
	// Trimmed as the gateway trims it: a token file's newline is no part
	// of the token.
	a.token = strings.TrimSpace(a.token)
	if a.token == "" {
		return nil, errNoToken
	}
	c, err := NewClient(a.server, a.token, a.env.HTTPClient)
	if err != nil {
		return nil, err
	}
	a.client = c
	return c, nil
}

// run wraps a command's body: the output format is checked before any
// request, and the whole command is bounded by --timeout.
func (a *app) run(csvOK bool, fn func(ctx context.Context, c *Client, cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := checkFormat(a.output, csvOK); err != nil {
			return err
		}
		c, err := a.connect(cmd)
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		if a.timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, a.timeout)
			defer cancel()
		}
		err = fn(ctx, c, cmd, args)
		if errors.Is(err, context.DeadlineExceeded) {
			return &ConnError{Msg: fmt.Sprintf("no answer within --timeout %s", a.timeout)}
		}
		return err
	}
}

// printError writes err for a person: an API error with its code, message,
// fields (sorted) and suggestion, one per line.
func printError(w io.Writer, name string, err error) {
	var ae *APIError
	if !errors.As(err, &ae) {
		fmt.Fprintf(w, "%s: %v\n", name, err)
		return
	}
	fmt.Fprintf(w, "%s: %s\n", name, ae.Error())
	for _, f := range slices.Sorted(maps.Keys(ae.Fields)) {
		fmt.Fprintf(w, "  %s: %s\n", f, ae.Fields[f])
	}
	if ae.Suggestion != "" {
		fmt.Fprintf(w, "  suggestion: %s\n", ae.Suggestion)
	}
}

// timeoutOr is --timeout, at most sec seconds (for shell completion).
func (a *app) timeoutOr(sec int) time.Duration {
	d := time.Duration(sec) * time.Second
	if a.timeout > 0 && a.timeout < d {
		return a.timeout
	}
	return d
}

// Command rolter is the rolter LLM gateway: `rolter serve` runs it,
// `rolter migrate` prepares its store, and `rolter providers|routes|keys|...`
// manage a running one through its admin API (package cli, docs/cli.md).
// See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/rolter/rolter/internal/cli"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/server"
	"github.com/rolter/rolter/internal/store/sqlstore"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole command line: package cli's resource commands (rolter
// providers list, ...) and, beside them, the commands of this package.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return cli.Execute(ctx, args, cli.Env{Stdin: os.Stdin, Stdout: stdout, Stderr: stderr, Version: buildVersion()},
		append(gatewayCommands(stdout, stderr), versionCmd(stdout))...)
}

// gatewayCommands are the commands that run a gateway, an agent or a tool
// on a store, as they were before the admin CLI: each parses its own
// flags with package flag, so their flags, help and messages are
// unchanged, and any error exits 1.
func gatewayCommands(stdout, stderr io.Writer) []*cobra.Command {
	type cmdFunc func(context.Context, []string, io.Writer, io.Writer) error
	wrap := func(use, short string, fn cmdFunc) *cobra.Command {
		c := &cobra.Command{
			Use:                use,
			Short:              short,
			DisableFlagParsing: true,
			RunE: func(cmd *cobra.Command, args []string) error {
				if err := fn(cmd.Context(), args, stdout, stderr); !errors.Is(err, flag.ErrHelp) {
					return err
				}
				return nil
			},
		}
		// "rolter help serve" shows the command's own flags.
		c.SetHelpFunc(func(cmd *cobra.Command, _ []string) { _ = fn(cmd.Context(), []string{"-h"}, stdout, stderr) })
		return c
	}
	return []*cobra.Command{
		wrap("serve [flags]", "run the gateway (client API, admin API, fleet /vllm/..., /metrics)", serve),
		wrap("migrate [flags]", "apply store migrations and exit", migrate),
		wrap("backup [flags] --out DIR", "write one restorable, compressed copy of the store", backupCmd),
		wrap("restore [flags] FILE", "bring a backup back (stop the gateway first)", restoreCmd),
		wrap("agent [flags]", "run on a GPU box: fetch its assignment, run vLLM", agentCmd),
		wrap("import [flags] FILE", "import a LiteLLM config.yaml or a rolter config file into the store", importCmd),
		wrap("bench [flags]", "measure rolter's overhead against a mock upstream", benchCmd),
		wrap("mock [flags]", "serve only the simulated upstream (used by bench)", mock),
		hidden(wrap("floor [flags]", "a stock reverse proxy to --upstream (used by bench)", floor)),
		wrap("keygen", "print a fresh master key for ROLTER_MASTER_KEY", keygen),
	}
}

// hidden keeps c out of help: a bench instrument, not a product command.
func hidden(c *cobra.Command) *cobra.Command {
	c.Hidden = true
	return c
}

// storeFlags are shared by every command that opens the store.
type storeFlags struct {
	dataDir, store string
}

func (s *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.dataDir, "data-dir", envOr("ROLTER_DATA_DIR", "./rolter-data"), "data directory: SQLite file and local state (env ROLTER_DATA_DIR)")
	fs.StringVar(&s.store, "store", envOr("ROLTER_STORE", "sqlite"), `"sqlite" (in the data dir), "sqlite:PATH" or a postgres:// URL (env ROLTER_STORE)`)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// durationInto parses a flag or environment value into d.
func durationInto(d *time.Duration) func(string) error {
	return func(v string) error {
		p, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%q is not a duration such as 30s", v)
		}
		*d = p
		return nil
	}
}

// logFlags are --log-level and --log-format, shared by the long-running
// commands.
type logFlags struct {
	level, format string
}

func (f *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.level, "log-level", envOr("ROLTER_LOG_LEVEL", "info"), "debug, info, warn or error (env ROLTER_LOG_LEVEL)")
	fs.StringVar(&f.format, "log-format", os.Getenv("ROLTER_LOG_FORMAT"),
		"json or text (default: text when the log goes to a terminal, else json; env ROLTER_LOG_FORMAT)")
}

// logger writes to w at the flags' level, in their format; with none, in
// text when w is a terminal (someone reads it) and in JSON otherwise (a
// service manager, a container runtime or a file collects it).
func (f logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(f.level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	format := f.format
	if format == "" {
		format = "json"
		if isTerminal(w) {
			format = "text"
		}
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is neither json nor text", format)
}

// newLogger is a logger at level in the default format for w.
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	return logFlags{level: level}.logger(w)
}

// isTerminal reports whether w is a character device (a terminal); the
// standard library's Stat is enough to tell.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rolter serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		sf  storeFlags
		cfg server.Config
		lf  logFlags
	)
	sf.register(fs)
	fs.StringVar(&cfg.Listen, "listen", envOr("ROLTER_LISTEN", "127.0.0.1:4000"), "listen address (env ROLTER_LISTEN)")
	fs.StringVar(&cfg.AdminListen, "admin-listen", os.Getenv("ROLTER_ADMIN_LISTEN"),
		"serve /admin, /ui and /metrics only on this address; --listen then serves only /v1, /vllm and the health endpoints (env ROLTER_ADMIN_LISTEN)")
	fs.StringVar(&cfg.ConfigFile, "config", os.Getenv("ROLTER_CONFIG"), "YAML file imported on start: creates what is missing, never overwrites (env ROLTER_CONFIG)")
	fs.BoolVar(&cfg.Demo, "demo", false, "serve and register a simulated upstream (provider and route \"demo\")")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long in-flight requests may finish after SIGTERM")
	fs.Int64Var(&cfg.Gateway.MaxBody, "max-body", 32<<20, "request body limit in bytes; larger requests get 413")
	fs.Int64Var(&cfg.Gateway.MaxBodyInFlight, "max-body-in-flight", 1<<30, "request body bytes all requests together may hold; beyond, 503 overloaded")
	fs.DurationVar(&cfg.Gateway.FirstByteTimeout, "first-byte-timeout", 300*time.Second, "per attempt, until the upstream's first byte (providers may override)")
	fs.DurationVar(&cfg.Gateway.IdleTimeout, "idle-timeout", 120*time.Second, "between stream events (providers may override)")
	fs.IntVar(&cfg.Gateway.MaxAttempts, "max-attempts", 3, "upstream attempts per request, failovers included")
	fs.DurationVar(&cfg.Metadata.Interval, "probe-interval", 10*time.Second, "active health probe and metadata refresh interval per provider (±10% jitter)")
	fs.IntVar(&cfg.Metadata.FailAfter, "probe-fail-after", 2, "consecutive failed probes before a provider is taken out")
	fs.IntVar(&cfg.Metadata.RecoverAfter, "probe-recover-after", 1, "consecutive good probes before it is back")
	fs.IntVar(&cfg.Gateway.Cooldown.Threshold, "cooldown-threshold", 3, "consecutive upstream failures before a target or key cools")
	fs.DurationVar(&cfg.Gateway.Cooldown.Base, "cooldown-base", 5*time.Second, "first cooldown; also a 429 without Retry-After")
	fs.DurationVar(&cfg.Gateway.Cooldown.Max, "cooldown-max", 5*time.Minute, "cap of the doubling cooldown (a Retry-After is honoured as sent)")
	fs.IntVar(&cfg.Usage.Buffer, "usage-buffer", 10000, "usage records held for the store; beyond, they are dropped and counted")
	fs.Func("body-timeout", "how long a client may take to send its request body; then 408 and the connection closes (default 30s, env ROLTER_BODY_TIMEOUT)",
		durationInto(&cfg.Gateway.BodyTimeout))
	fs.Func("client-write-timeout", "how long one write to a client that stopped reading may block; then the request is cancelled as client_slow (default 60s, env ROLTER_CLIENT_WRITE_TIMEOUT)",
		durationInto(&cfg.Gateway.ClientWriteTimeout))
	metricsToken := os.Getenv("ROLTER_METRICS_TOKEN")
	fs.Func("metrics-token", "require this bearer token on /metrics (env ROLTER_METRICS_TOKEN, preferred: a flag shows in ps)",
		func(v string) error { metricsToken = v; return nil })
	fs.DurationVar(&cfg.Gateway.CredentialCooldown, "credential-cooldown", 10*time.Minute, "how long a pool key the upstream refused (401/403) is left out; editing the key ends it")
	fs.DurationVar(&cfg.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "how long a client may take to send its request headers")
	fs.BoolVar(&cfg.UISecureCookie, "ui-secure-cookie", os.Getenv("ROLTER_UI_SECURE_COOKIE") == "true",
		"always mark the web console's session cookie Secure (behind a TLS proxy that sends no X-Forwarded-Proto; env ROLTER_UI_SECURE_COOKIE=true)")
	fs.StringVar(&cfg.Gateway.UpstreamClient, "upstream-client", defaultUpstreamClient,
		"upstream HTTP client: h1 (rolter's own HTTP/1.1 client) or std (Go's http.Transport); docs/performance.md compares them")
	fs.BoolVar(&cfg.AllowLinkLocalUpstreams, "allow-link-local-upstreams", false, "allow provider base_urls on link-local and cloud metadata addresses (never 0.0.0.0 or ::)")
	fs.DurationVar(&cfg.Fleet.Controller.Interval, "fleet-probe-interval", 10*time.Second, "how often the fleet controller probes each host's /health and /v1/models")
	fs.IntVar(&cfg.Fleet.Controller.FailAfter, "fleet-fail-after", 3, "consecutive failed probes before a serving host is deregistered (never retired)")
	fs.BoolVar(&cfg.Fleet.DisableController, "no-fleet-controller", false, "do not probe or register fleet hosts on this replica")
	fs.StringVar(&cfg.Fleet.Handler.ProxyHeader, "fleet-proxy-header", "", "header carrying a GPU box's address (e.g. X-Forwarded-For); read only from --fleet-trusted-proxies")
	trusted := fs.String("fleet-trusted-proxies", "", "comma-separated CIDRs of reverse proxies whose --fleet-proxy-header is believed")
	fs.StringVar(&cfg.Redis, "redis", os.Getenv("ROLTER_REDIS"), "redis:// URL shared by replicas for rate limits; unset, limits are counted in memory (env ROLTER_REDIS, preferred when it holds a password)")
	fs.DurationVar(&cfg.RedisTimeout, "redis-timeout", 50*time.Millisecond, "a rate limit check slower than this, or failed, is answered by this replica's counters until Redis is back")
	lf.register(fs)
	cfg.Gateway.BodyTimeout, cfg.Gateway.ClientWriteTimeout = 30*time.Second, 60*time.Second
	for _, e := range []struct {
		env string
		d   *time.Duration
	}{{"ROLTER_BODY_TIMEOUT", &cfg.Gateway.BodyTimeout}, {"ROLTER_CLIENT_WRITE_TIMEOUT", &cfg.Gateway.ClientWriteTimeout}} {
		if v := os.Getenv(e.env); v != "" {
			if err := durationInto(e.d)(v); err != nil {
				return fmt.Errorf("%s: %w", e.env, err)
			}
		}
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	for _, c := range strings.Split(*trusted, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return fmt.Errorf("--fleet-trusted-proxies: %q is not a CIDR (e.g. 10.0.0.0/8)", c)
		}
		cfg.Fleet.Handler.TrustedProxies = append(cfg.Fleet.Handler.TrustedProxies, p.Masked())
	}
	if err := checkServeFlags(&cfg); err != nil {
		return err
	}
	if cfg.Fleet.Handler.ProxyHeader != "" && len(cfg.Fleet.Handler.TrustedProxies) == 0 {
		return errors.New("--fleet-proxy-header needs --fleet-trusted-proxies: the header is believed only from those proxies")
	}
	log, err := lf.logger(stderr)
	if err != nil {
		return err
	}
	cfg.DataDir, cfg.Store, cfg.Out = sf.dataDir, sf.store, stdout
	// Trimmed like the token in a request header, so a token file's
	// trailing newline does not lock the operator out.
	cfg.AdminToken = secret.New(strings.TrimSpace(os.Getenv("ROLTER_ADMIN_TOKEN")))
	cfg.MasterKey = secret.New(os.Getenv("ROLTER_MASTER_KEY"))
	if metricsToken = strings.TrimSpace(metricsToken); metricsToken != "" && len(metricsToken) < 16 {
		return errors.New("--metrics-token (ROLTER_METRICS_TOKEN) must be at least 16 characters")
	}
	cfg.MetricsToken = secret.New(metricsToken)
	return server.Run(ctx, cfg, log)
}

// checkServeFlags refuses counts below 1 and durations below or at 0,
// which the packages would otherwise quietly replace with their defaults.
// defaultUpstreamClient is --upstream-client's default; a string
// variable so that an A/B bench build can flip it with -ldflags -X.
var defaultUpstreamClient = "h1"

func checkServeFlags(cfg *server.Config) error {
	switch cfg.Gateway.UpstreamClient {
	case "h1", "std":
	default:
		return fmt.Errorf("--upstream-client must be h1 or std, not %q", cfg.Gateway.UpstreamClient)
	}
	for _, c := range []struct {
		flag string
		v    int64
	}{
		{"max-body", cfg.Gateway.MaxBody},
		{"max-body-in-flight", cfg.Gateway.MaxBodyInFlight},
		{"max-attempts", int64(cfg.Gateway.MaxAttempts)},
		{"probe-fail-after", int64(cfg.Metadata.FailAfter)},
		{"probe-recover-after", int64(cfg.Metadata.RecoverAfter)},
		{"cooldown-threshold", int64(cfg.Gateway.Cooldown.Threshold)},
		{"usage-buffer", int64(cfg.Usage.Buffer)},
		{"fleet-fail-after", int64(cfg.Fleet.Controller.FailAfter)},
	} {
		if c.v < 1 {
			return fmt.Errorf("--%s must be at least 1", c.flag)
		}
	}
	for _, c := range []struct {
		flag string
		v    time.Duration
	}{
		{"first-byte-timeout", cfg.Gateway.FirstByteTimeout},
		{"idle-timeout", cfg.Gateway.IdleTimeout},
		{"probe-interval", cfg.Metadata.Interval},
		{"cooldown-base", cfg.Gateway.Cooldown.Base},
		{"cooldown-max", cfg.Gateway.Cooldown.Max},
		{"read-header-timeout", cfg.ReadHeaderTimeout},
		{"body-timeout", cfg.Gateway.BodyTimeout},
		{"client-write-timeout", cfg.Gateway.ClientWriteTimeout},
		{"credential-cooldown", cfg.Gateway.CredentialCooldown},
		{"fleet-probe-interval", cfg.Fleet.Controller.Interval},
	} {
		if c.v <= 0 {
			return fmt.Errorf("--%s must be a positive duration, e.g. 10s", c.flag)
		}
	}
	if cfg.ShutdownTimeout < 0 {
		return errors.New("--shutdown-timeout must not be negative")
	}
	return nil
}

func migrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rolter migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sf storeFlags
	sf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	db, err := sqlstore.Open(ctx, sf.store, sf.dataDir, nil) // Open migrates
	if err != nil {
		return err
	}
	defer db.Close()
	fmt.Fprintf(stdout, "rolter: %s store is up to date\n", db.Dialect())
	return nil
}

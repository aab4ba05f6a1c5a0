package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/config"
	"github.com/rolter/rolter/internal/litellm"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/sqlstore"
)

// Formats `rolter import` reads, told apart by their top-level key.
const (
	formatLiteLLM = "litellm" // model_list
	formatRolter  = "rolter"  // orgs
)

// sniffFormat reads only the top-level keys of a YAML document.
func sniffFormat(b []byte) (string, error) {
	var top map[string]yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&top); err != nil {
		if errors.Is(err, io.EOF) {
			return "", errors.New("the file is empty: expected a LiteLLM config (model_list) or a rolter config (orgs)")
		}
		return "", fmt.Errorf("not a YAML mapping: %w", err)
	}
	_, ml := top["model_list"]
	_, orgs := top["orgs"]
	switch {
	case ml && orgs:
		return "", errors.New("the file has both model_list (LiteLLM) and orgs (rolter); import them as separate files")
	case ml:
		return formatLiteLLM, nil
	case orgs:
		return formatRolter, nil
	}
	return "", errors.New("neither a LiteLLM config (no top-level model_list) nor a rolter config (no top-level orgs)")
}

func importCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rolter import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: rolter import [flags] FILE

Imports a LiteLLM config.yaml (top-level model_list) into an org and
project, or a rolter config file (top-level orgs) as serve --config does.
Creates what is missing; running it again is safe. A LiteLLM import skips
the entries rolter cannot serve and lists them, warns about every setting
it does not carry over, and updates the providers it created before where
the file changed them (docs/import.md).

`)
		fs.PrintDefaults()
	}
	var (
		sf       storeFlags
		opts     litellm.Options
		logLevel string
	)
	sf.register(fs)
	fs.StringVar(&opts.Org, "org", "default", "LiteLLM files: the org that gets the providers (created if missing)")
	fs.StringVar(&opts.Project, "project", "default", "LiteLLM files: the project that gets the routes (created if missing)")
	fs.BoolVar(&opts.DryRun, "dry-run", false, "print what would be created and write nothing; LiteLLM files need no os.environ/ variable set")
	fs.BoolVar(&opts.Strict, "strict", false, "LiteLLM files: refuse the file (exit 1, nothing written) if any entry would be skipped")
	fs.BoolVar(&opts.Probe, "probe", false, "LiteLLM files: ask each openai-kind server for GET /props (3s each) to suggest kind llamacpp; dry runs too")
	fs.StringVar(&logLevel, "log-level", envOr("ROLTER_LOG_LEVEL", "info"), "debug, info, warn or error (env ROLTER_LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("want exactly one FILE")
	}
	path := fs.Arg(0)
	log, err := newLogger(stderr, logLevel)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	format, err := sniffFormat(b)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}

	var (
		lcfg *litellm.Config
		rcfg *config.File
	)
	switch format {
	case formatLiteLLM:
		parse := litellm.Parse
		if opts.DryRun {
			parse = litellm.ParseDryRun
		}
		if lcfg, err = parse(b, os.LookupEnv); err != nil {
			return fmt.Errorf("%s:\n%w", path, err)
		}
		for _, w := range lcfg.Warnings {
			fmt.Fprintf(stderr, "rolter import: warning: %s\n", w)
		}
	case formatRolter:
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if set["org"] || set["project"] {
			return errors.New("--org and --project apply to LiteLLM files; a rolter config file names its orgs and projects itself")
		}
		if set["strict"] || set["probe"] {
			return errors.New("--strict and --probe apply to LiteLLM files; a rolter config file is parsed strictly anyway")
		}
		if rcfg, err = config.Load(path); err != nil {
			return err
		}
		if opts.DryRun {
			printRolterDryRun(stdout, rcfg)
			return nil
		}
	}

	sealer, err := secret.NewSealer(secret.New(os.Getenv("ROLTER_MASTER_KEY")))
	if err != nil {
		return fmt.Errorf("ROLTER_MASTER_KEY: %w", err)
	}
	if opts.DryRun && !sqliteExists(sf) {
		// A dry run must not create the database it would import into.
		fmt.Fprintln(stdout, "dry run: the store does not exist yet; planning against an empty one")
		return litellm.Run(ctx, emptyStore{}, nil, lcfg, opts, stdout)
	}
	db, err := sqlstore.Open(ctx, sf.store, sf.dataDir, sealer)
	if err != nil {
		return err
	}
	defer db.Close()
	// Nothing here serves requests, so no snapshot is built; the replicas
	// serving this store hear of every write, as of their own (on SQLite
	// a running server rebuilds at its next change or restart).
	svc := admin.NewService(db, nil, log)
	svc.SetPublisher(func(ctx context.Context) {
		if err := db.NotifyChange(ctx); err != nil {
			log.Warn("could not announce the import to running replicas; they pick it up at their next change", "err", err)
		}
	})
	if rcfg != nil {
		return config.Apply(ctx, svc, rcfg, stdout, log)
	}
	return litellm.Run(ctx, db, svc, lcfg, opts, stdout)
}

// printRolterDryRun summarises a parsed rolter config file. It is not
// compared with the store: config.Apply has no dry run, and what exists is
// only known by trying.
func printRolterDryRun(w io.Writer, f *config.File) {
	fmt.Fprintln(w, "dry run: rolter config file parsed; it is not compared with the store, and nothing was written")
	for _, o := range f.Orgs {
		var routes, keys []string
		for _, p := range o.Projects {
			for _, r := range p.Routes {
				routes = append(routes, p.Name+"/"+r.Model)
			}
			for _, k := range p.Keys {
				keys = append(keys, p.Name+"/"+k.Name)
			}
		}
		provs := make([]string, 0, len(o.Providers))
		for _, p := range o.Providers {
			provs = append(provs, firstNonEmpty(p.Slug, p.Name))
		}
		fmt.Fprintf(w, "org %s: providers [%s], routes [%s], virtual keys [%s]\n", o.Name,
			strings.Join(provs, ", "), strings.Join(routes, ", "), strings.Join(keys, ", "))
	}
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// sqliteExists reports whether the store is a SQLite file that exists, or
// not SQLite at all (a server database is opened as usual).
func sqliteExists(sf storeFlags) bool {
	spec := sf.store
	if spec != "" && spec != "sqlite" && !strings.HasPrefix(spec, "sqlite:") {
		return true
	}
	path := strings.TrimPrefix(strings.TrimPrefix(spec, "sqlite"), ":")
	if path == "" {
		path = filepath.Join(sf.dataDir, sqlstore.SQLiteFile)
	}
	_, err := os.Stat(path)
	return err == nil
}

// emptyStore is the store a dry run plans against when none exists yet.
type emptyStore struct{}

func (emptyStore) Load(context.Context) (*store.State, error) { return &store.State{}, nil }
func (emptyStore) SlugTaken(context.Context, int64, string) (bool, error) {
	return false, nil
}
func (emptyStore) GetOrg(context.Context, string) (*store.Org, error) { return nil, store.ErrNotFound }
func (emptyStore) GetProvider(context.Context, int64, string) (*store.Provider, error) {
	return nil, store.ErrNotFound
}

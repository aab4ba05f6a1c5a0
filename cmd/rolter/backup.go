package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/backup"
	"github.com/rolter/rolter/internal/store/sqlstore"
)

func backupCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rolter backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: rolter backup [flags] --out DIR

Writes one restorable, compressed copy of the store into DIR and prints
its path: rolter-sqlite-<UTC time>.db.gz (SQLite online backup, gzipped)
or rolter-postgres-<UTC time>.dump (pg_dump custom format; pg_dump must be
on PATH). The gateway may keep running. See docs/backup.md.

`)
		fs.PrintDefaults()
	}
	var (
		sf  storeFlags
		out string
	)
	sf.register(fs)
	fs.StringVar(&out, "out", "", "directory for the backup file (created if missing); required")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if out == "" {
		fs.Usage()
		return errors.New("--out DIR is required")
	}
	path, err := backup.Backup(ctx, sf.store, sf.dataDir, out, time.Now())
	if err != nil {
		return err
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rolter: backup written to %s (%s)\n", path, humanSize(st.Size()))
	return nil
}

func restoreCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rolter restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: rolter restore [flags] FILE

Replaces the whole store with the backup FILE written by rolter backup,
then migrates it forward. Stop the gateway first: while a gateway serves
the store the restore is refused, because that gateway would keep serving
its old routing state. --force restores anyway and tells running replicas
to reload (PostgreSQL); a SQLite gateway must then be restarted. A SQLite backup goes
into a SQLite store, a PostgreSQL one (pg_restore and psql must be on PATH)
into a PostgreSQL store with the same schema name. Virtual keys and admin
tokens come back as hashes: they keep working, but cannot be shown again.
See docs/backup.md for what a restore does not bring back.

`)
		fs.PrintDefaults()
	}
	var sf storeFlags
	sf.register(fs)
	force := fs.Bool("force", false, "restore even while a gateway serves the store, then tell running replicas to reload (PostgreSQL; restart a SQLite gateway)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// Flags may also follow FILE.
	var files []string
	for fs.NArg() > 0 {
		files = append(files, fs.Arg(0))
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return err
		}
	}
	if len(files) != 1 {
		fs.Usage()
		return errors.New("want exactly one FILE")
	}
	file := files[0]
	if !*force {
		if err := backup.Restore(ctx, sf.store, sf.dataDir, file); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "rolter: restored %s into the %s; start the gateway again\n", file, backup.Describe(sf.store, sf.dataDir))
	} else {
		serving, err := backup.RestoreForce(ctx, sf.store, sf.dataDir, file)
		if err != nil {
			return err
		}
		switch {
		case !serving:
			fmt.Fprintf(stdout, "rolter: restored %s into the %s; start the gateway again\n", file, backup.Describe(sf.store, sf.dataDir))
		case strings.HasPrefix(sf.store, "postgres"):
			fmt.Fprintf(stdout, "rolter: restored %s into the %s under running gateways; they were told to reload their routing state\n", file, backup.Describe(sf.store, sf.dataDir))
		default:
			fmt.Fprintf(stdout, "rolter: restored %s into the %s under a running gateway; restart it: until then it serves its old routing state\n", file, backup.Describe(sf.store, sf.dataDir))
		}
	}
	// A restore creates the store 0600 but keeps an existing file's mode.
	for _, f := range sqlstore.LooseFiles(sf.store, sf.dataDir) {
		fmt.Fprintf(stderr, "rolter: warning: %s is mode %#o: other users can read the keys in it; run chmod 600 on it\n", f.Path, f.Mode)
	}
	return nil
}

// humanSize prints a byte count the way ls -h would, roughly.
func humanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, suffix := float64(n)/unit, "KB"
	for _, s := range []string{"MB", "GB", "TB"} {
		if v < unit {
			break
		}
		v, suffix = v/unit, s
	}
	if v < 10 {
		return fmt.Sprintf("%.1f %s", v, suffix)
	}
	return fmt.Sprintf("%.0f %s", v, suffix)
}

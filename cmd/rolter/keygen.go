package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/rolter/rolter/internal/secret"
)

// keygen prints a fresh master key for ROLTER_MASTER_KEY: 32 bytes from
// the operating system's random source, in base64 (package secret,
// masterkey.go, has the accepted formats).
func keygen(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rolter keygen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rolter keygen\n\n"+
			"Prints a fresh master key (32 random bytes, base64) for ROLTER_MASTER_KEY, which seals\n"+
			"provider and host keys at rest. Keep it beside, not inside, your backups: a store sealed\n"+
			"under it is unreadable without it.")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	_, err := fmt.Fprintln(stdout, secret.GenerateKey().Reveal())
	return err
}

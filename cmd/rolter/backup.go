package main

import (
	"context"
	"errors"
	"io"
)

func backupCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not implemented yet")
}

func restoreCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not implemented yet")
}

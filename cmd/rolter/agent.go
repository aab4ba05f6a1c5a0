package main

import (
	"context"
	"errors"
	"io"
)

func agentCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not implemented yet")
}

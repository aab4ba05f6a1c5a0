package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/rolter/rolter/internal/demo"
)

// mock serves only the simulated upstream (package demo, what --demo mounts
// under /demo) at the root of its own listener, as its own process: `rolter
// bench` runs it so that the upstream's CPU and memory are measured apart
// from the gateway's.
func mock(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rolter mock", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "listen address (port 0: any free port)")
	printAddr := fs.Bool("print-addr", false, "print the bound host:port as the first line of stdout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	return serveUntilDone(ctx, ln, demo.New(demo.Options{}), *printAddr, stdout)
}

// serveUntilDone serves h on ln until ctx ends, then closes the server at
// once (the measuring instruments have nothing worth draining: in-flight
// streams just end). With printAddr the bound host:port is the first line
// of stdout.
func serveUntilDone(ctx context.Context, ln net.Listener, h http.Handler, printAddr bool, stdout io.Writer) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	if printAddr {
		fmt.Fprintln(stdout, ln.Addr().String())
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	err := srv.Close()
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

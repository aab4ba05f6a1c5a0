package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"

	"github.com/rolter/rolter/internal/gateway"
)

// floor is a stock httputil.ReverseProxy in front of --upstream, with the
// gateway's upstream transport settings and nothing else: no auth, no body
// work, no accounting. `rolter bench` runs it as the floor a gateway is
// measured against (docs/performance.md). Hidden from help: it is a
// measuring instrument, not a product.
func floor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rolter floor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "listen address (port 0: any free port)")
	upstream := fs.String("upstream", "", "base URL every request is proxied to, e.g. http://127.0.0.1:8000")
	printAddr := fs.Bool("print-addr", false, "print the bound host:port as the first line of stdout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	target, err := url.Parse(*upstream)
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		return fmt.Errorf("--upstream %q: want an http:// or https:// base URL", *upstream)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport: gateway.NewTransport(false),
		ErrorLog:  log.New(stderr, "rolter floor: ", log.LstdFlags),
	}
	// Full duplex: an HTTP/1 server closes a request body once the answer's
	// headers are written, and a streamed answer can start before the
	// transport has read the body's EOF; that read would then fail and
	// the transport drop the upstream connection mid-stream.
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		proxy.ServeHTTP(w, r)
	})
	return serveUntilDone(ctx, ln, h, *printAddr, stdout)
}

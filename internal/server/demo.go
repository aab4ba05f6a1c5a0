package server

import (
	"context"
	"fmt"
	"net/http"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/demo"
	"github.com/rolter/rolter/internal/store"
)

// Names --demo registers.
const (
	DemoProvider = "demo"
	DemoRoute    = "demo"
	DemoModel    = demo.ModelID
)

// mountDemo serves the simulated upstream under /demo and registers it as
// provider "demo" with route "demo" in the default project. The provider's
// base_url follows the listen address, which may change between runs; the
// route is created once and then left to the operator.
func (s *Server) mountDemo(ctx context.Context, mux *http.ServeMux, svc *admin.Service) error {
	mux.Handle("/demo/", http.StripPrefix("/demo", demo.New(demo.Options{})))
	hostPort, err := localHostPort(s.Addr)
	if err != nil {
		return err
	}
	base := "http://" + hostPort + "/demo/v1"
	// The simulator is shaped per request by x-demo-* headers, which the
	// gateway forwards only because the provider says so.
	forward := []string{"X-Demo-*"}
	_, err = svc.CreateProvider(ctx, DefaultOrg, admin.ProviderInput{
		Name: "rolter demo upstream", Slug: DemoProvider, Kind: store.KindVLLM, BaseURL: base, Models: []string{DemoModel},
		ForwardHeaders: forward})
	if admin.AlreadyExists(err) {
		_, err = svc.UpdateProvider(ctx, DefaultOrg, DemoProvider, admin.ProviderPatch{BaseURL: &base, ForwardHeaders: &forward}, false)
	}
	if err != nil {
		return fmt.Errorf("--demo: register provider %q in org %q: %w", DemoProvider, DefaultOrg, err)
	}
	_, err = svc.CreateRoute(ctx, DefaultOrg, DefaultProject, admin.RouteInput{
		Model: DemoRoute, Targets: []admin.TargetInput{{Provider: DemoProvider, UpstreamModel: DemoModel}}})
	if err != nil && !admin.AlreadyExists(err) {
		return fmt.Errorf("--demo: register route %q: %w", DemoRoute, err)
	}
	return nil
}

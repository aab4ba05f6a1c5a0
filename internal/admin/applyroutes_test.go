package admin_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/store/storetest"
)

// routesFile is one org with providers p0..p2 and project "web" holding
// the routes; manyRoutes is n routes over them, with 1 to 3 targets, and
// every seventh falls back to a route 1,001 places earlier (in another
// batch of the apply's) or, near the start, to the first.
func routesFile(routes []admin.RouteInput) admin.Desired {
	d := admin.Desired{Orgs: []admin.DesiredOrg{{OrgInput: admin.OrgInput{Name: "acme"}}}}
	for i := range 3 {
		d.Orgs[0].Providers = append(d.Orgs[0].Providers, admin.DesiredProvider{ProviderInput: admin.ProviderInput{
			Slug: fmt.Sprintf("p%d", i), Kind: "openai", BaseURL: fmt.Sprintf("https://p%d.example/v1", i), ContextLimit: 8192}})
	}
	d.Orgs[0].Projects = []admin.DesiredProject{{ProjectInput: admin.ProjectInput{Name: "web"}, Routes: routes}}
	return d
}

func manyRoutes(n int) []admin.RouteInput {
	rs := make([]admin.RouteInput, n)
	for i := range rs {
		r := admin.RouteInput{Model: fmt.Sprintf("m-%05d", i), RPMLimit: i % 5}
		for j := range 1 + i%3 {
			r.Targets = append(r.Targets, admin.TargetInput{Provider: fmt.Sprintf("p%d", (i+j)%3), UpstreamModel: "up", Priority: j})
		}
		if i > 0 && i%7 == 0 {
			r.Fallbacks = []string{fmt.Sprintf("m-%05d", max(i-1001, 0))}
		}
		rs[i] = r
	}
	return rs
}

// routeViews are the project's routes as the API shows them, times left
// out.
func routeViews(t *testing.T, svc *admin.Service, project string) map[string]admin.RouteView {
	t.Helper()
	out := map[string]admin.RouteView{}
	pr := admin.PageRequest{Limit: 1000}
	for {
		page, err := svc.ListRoutes(context.Background(), "acme", project, pr)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range page.Data {
			v.CreatedAt, v.UpdatedAt = time.Time{}, time.Time{}
			out[v.Model] = v
		}
		if page.NextCursor == "" {
			return out
		}
		pr.Cursor = page.NextCursor
	}
}

// Issue 21: an apply creates new routes in batches, each checked as
// CreateRoute checks it. What it writes is what one CreateRoute per route
// writes, fallbacks across batches included, in both modes; the change
// list names every route in the file's order.
func TestApplyCreatesRoutesInBatches(t *testing.T) {
	n := 1100 // more than one batch
	if testing.Short() {
		n = 120 // enough to read the providers at once (preloadProviders)
	}
	storetest.Each(t, func(t *testing.T, d string) {
		for _, opt := range []admin.ApplyOptions{{CreateOnly: true}, {}} {
			e := newApplyEnv(t, d)
			ctx := context.Background()
			routes := manyRoutes(n)
			res := e.apply(t, routesFile(routes), opt)
			if got := res.Count(admin.ActionCreate); got != 1+3+1+n {
				t.Fatalf("%+v: %d creates, want %d", opt, got, 1+3+1+n)
			}
			for i, c := range res.Changes[5:] {
				if want := fmt.Sprintf("orgs[0].projects[0].routes[%d]", i); c.Entry != want || c.Kind != admin.KindRoute || c.Name != "acme/web/"+routes[i].Model {
					t.Fatalf("change %d: %+v, want %s", i, c, want)
				}
			}
			if _, err := e.svc.CreateProject(ctx, "acme", admin.ProjectInput{Name: "one"}); err != nil {
				t.Fatal(err)
			}
			for _, r := range routes {
				if _, err := e.svc.CreateRoute(ctx, "acme", "one", r); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := routeViews(t, e.svc, "web"), routeViews(t, e.svc, "one"); len(got) != n || !reflect.DeepEqual(got, want) {
				t.Fatalf("%+v: %d routes differ from those CreateRoute wrote", opt, len(got))
			}
			if e.commits != 1+n+1 { // the apply, each CreateRoute and the project
				t.Fatalf("%+v: %d announcements", opt, e.commits)
			}
		}
	})
}

// The first route that fails its checks stops the apply, named by its
// entry: a create-only apply keeps the routes before it (those of earlier
// batches and of its own), a transactional one nothing. A fleet pool's
// contract is checked as CreateRoute checks it.
func TestApplyRouteBatchFailures(t *testing.T) {
	n := 1100
	if testing.Short() {
		n = 40
	}
	storetest.Each(t, func(t *testing.T, d string) {
		for _, opt := range []admin.ApplyOptions{{CreateOnly: true}, {}} {
			e := newApplyEnv(t, d)
			ctx := context.Background()
			routes := manyRoutes(n)
			bad := n - 5
			routes[bad].Targets[0].Provider = "nope"
			_, err := e.svc.Apply(ctx, routesFile(routes), opt)
			var ae *admin.ApplyError
			if !errors.As(err, &ae) || ae.Entry != fmt.Sprintf("orgs[0].projects[0].routes[%d]", bad) || admin.AsError(err).Code != admin.CodeUnknownProvider {
				t.Fatalf("%+v: %v", opt, err)
			}
			want := 0
			if opt.CreateOnly {
				want = bad
			}
			if !opt.CreateOnly {
				if _, err := e.svc.GetOrg(ctx, "acme"); !errors.Is(err, admin.ErrNotFound) {
					t.Fatalf("a failed transactional apply wrote: %v", err)
				}
				continue
			}
			if got := len(routeViews(t, e.svc, "web")); got != want {
				t.Fatalf("%+v: %d routes kept, want %d", opt, got, want)
			}
		}

		// A route of a model with live fleet hosts, whose target breaks
		// their contract.
		e := newApplyEnv(t, d)
		ctx := context.Background()
		if _, err := e.svc.CreateOrg(ctx, admin.OrgInput{Name: "acme"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.CreateProject(ctx, "acme", admin.ProjectInput{Name: "web"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.CreateHost(ctx, "acme", admin.HostInput{IP: "10.0.0.5", Port: 8000, Project: "web", ModelName: "qwen3", Recipe: qwenRecipe("32768")}); err != nil {
			t.Fatal(err)
		}
		routes := manyRoutes(3)
		routes = append(routes, admin.RouteInput{Model: "qwen3", Targets: []admin.TargetInput{{Provider: "p0", UpstreamModel: "gpt-4o"}}})
		_, err := e.svc.Apply(ctx, routesFile(routes), admin.ApplyOptions{CreateOnly: true})
		wantContract(t, "apply", err, "served model name", `"gpt-4o"`)
		if got := len(routeViews(t, e.svc, "web")); got != 3 {
			t.Fatalf("%d routes kept, want 3", got)
		}
	})
}

// A create-only apply leaves a route that exists as it is, also when the
// batch's write finds it (a file that names a model twice, or a route
// created since the apply read the store): the batch is written again a
// route at a time.
func TestApplyRouteBatchMeetsExisting(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		e := newApplyEnv(t, d)
		routes := manyRoutes(6)
		twice := routes[2]
		twice.Targets = []admin.TargetInput{{Provider: "p2", UpstreamModel: "other"}}
		routes = append(routes, twice)
		res := e.apply(t, routesFile(routes), admin.ApplyOptions{CreateOnly: true})
		last := res.Changes[len(res.Changes)-1]
		if last.Entry != "orgs[0].projects[0].routes[6]" || last.Action != admin.ActionUnchanged || res.Count(admin.ActionCreate) != 1+3+1+6 {
			t.Fatalf("changes: %+v", res.Changes)
		}
		v, err := e.svc.GetRoute(context.Background(), "acme", "web", twice.Model)
		if err != nil || len(v.Targets) != 3 || v.Targets[0].Provider != "p2" || v.Targets[0].UpstreamModel != "up" {
			t.Fatalf("the first entry of the model: %+v %v", v, err)
		}
		if got := len(routeViews(t, e.svc, "web")); got != 6 {
			t.Fatalf("%d routes", got)
		}
	})
}

package sqlstore

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/rolter/rolter/internal/store"
)

// TestShareStrings checks that equal strings of a loaded state end up as
// one: a target's provider slug is its provider's, an upstream model equal
// to its route's model is that model, and equal strategies are one string.
// Values never change.
func TestShareStrings(t *testing.T) {
	fresh := func(s string) string { return strings.Clone(s) } // as a driver returns each column
	st := &store.State{
		Providers: []store.Provider{{ID: 1, Slug: fresh("a"), Kind: fresh("vllm")}, {ID: 3, Slug: fresh("b"), Kind: fresh("vllm")}},
		Routes: []store.Route{
			{ID: 1, Model: fresh("m1"), Strategy: fresh("weighted"), Targets: []store.Target{
				{ProviderID: 3, ProviderSlug: fresh("b"), UpstreamModel: fresh("m1")},
				{ProviderID: 1, ProviderSlug: fresh("a"), UpstreamModel: fresh("up")},
			}},
			{ID: 2, Model: fresh("m2"), Strategy: fresh("weighted"), Targets: []store.Target{
				{ProviderID: 1, ProviderSlug: fresh("a"), UpstreamModel: fresh("up")},
				{ProviderID: 2, ProviderSlug: fresh("gone"), UpstreamModel: fresh("")},
			}},
		},
		Groups: []store.Group{{ID: 1, Strategy: fresh("weighted"), Members: []store.GroupMember{{ProviderID: 3, ProviderSlug: fresh("b")}}}},
	}
	same := func(what, a, b string) {
		t.Helper()
		if a != b || unsafe.StringData(a) != unsafe.StringData(b) {
			t.Errorf("%s: %q and %q are not one string", what, a, b)
		}
	}
	shareStrings(st)
	r1, r2 := st.Routes[0], st.Routes[1]
	same("target slug", r1.Targets[0].ProviderSlug, st.Providers[1].Slug)
	same("target slug", r1.Targets[1].ProviderSlug, st.Providers[0].Slug)
	same("member slug", st.Groups[0].Members[0].ProviderSlug, st.Providers[1].Slug)
	same("upstream model", r1.Targets[0].UpstreamModel, r1.Model)
	same("upstream model", r1.Targets[1].UpstreamModel, r2.Targets[0].UpstreamModel)
	same("strategy", r1.Strategy, r2.Strategy)
	same("strategy", r1.Strategy, st.Groups[0].Strategy)
	same("kind", st.Providers[0].Kind, st.Providers[1].Kind)
	if got := r2.Targets[1].ProviderSlug; got != "gone" {
		t.Errorf("the slug of a provider not in the state became %q", got)
	}
}

package policy

import (
	"testing"

	"github.com/rolter/rolter/internal/store"
)

func TestStrictest(t *testing.T) {
	allow := store.Policy{}
	cases := []struct {
		name string
		a, b store.Policy
		want store.Policy
	}{
		{"both open", allow, allow, allow},
		{"address denies tools", store.Policy{Tools: "deny"}, allow, store.Policy{Tools: "deny"}},
		{"provider denies tools", store.Policy{Tools: "allow"}, store.Policy{Tools: "deny"}, store.Policy{Tools: "deny"}},
		{"provider denies media", allow, store.Policy{Media: "deny"}, store.Policy{Media: "deny"}},
		{"lower ceiling wins", store.Policy{MaxOutputTokens: 500}, store.Policy{MaxOutputTokens: 100}, store.Policy{MaxOutputTokens: 100}},
		{"ceiling on one side", allow, store.Policy{MaxOutputTokens: 100, MaxConcurrency: 3}, store.Policy{MaxOutputTokens: 100, MaxConcurrency: 3}},
		{"concurrency", store.Policy{MaxConcurrency: 2}, store.Policy{MaxConcurrency: 8}, store.Policy{MaxConcurrency: 2}},
	}
	for _, c := range cases {
		if got := Strictest(c.a, c.b); got != c.want {
			t.Errorf("%s: Strictest(%+v, %+v) = %+v, want %+v", c.name, c.a, c.b, got, c.want)
		}
		// Order does not matter for what is refused or clamped.
		if got, rev := Strictest(c.a, c.b), Strictest(c.b, c.a); got.MaxOutputTokens != rev.MaxOutputTokens ||
			(got.Tools == "deny") != (rev.Tools == "deny") || (got.Media == "deny") != (rev.Media == "deny") {
			t.Errorf("%s: not symmetric: %+v vs %+v", c.name, got, rev)
		}
	}
}

package admin_test

import (
	"regexp"
	"testing"

	"github.com/rolter/rolter/internal/admin"
)

var slugRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// FuzzDeriveSlug: a derived slug is empty or valid, and deriving it again
// changes nothing.
func FuzzDeriveSlug(f *testing.F) {
	for _, s := range []string{"vLLM Moscow", "rolter demo upstream", "GPU box #2 (H100)", "--a--b--", "Ünïcödé only", "\u212a", "",
		"a-very-long-name-that-goes-on-and-on-past-the-sixty-three-character-limit-of-slugs"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		s := admin.DeriveSlug(name)
		if s == "" {
			return
		}
		if !slugRe.MatchString(s) || s[len(s)-1] == '-' {
			t.Fatalf("DeriveSlug(%q) = %q: not a valid slug", name, s)
		}
		if again := admin.DeriveSlug(s); again != s {
			t.Fatalf("DeriveSlug not idempotent: %q -> %q -> %q", name, s, again)
		}
	})
}

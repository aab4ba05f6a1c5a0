package admin_test

import (
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/admin"
)

var slugPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// name70 is a 70-character name whose slug is cut: the bare slug to 63
// characters, a suffixed one to 58 plus "-N".
var (
	name70   = strings.Repeat("a", 60) + " " + strings.Repeat("b", 9) // 70 chars
	slug70   = strings.Repeat("a", 60) + "-bb"                        // cut to 63
	slug70s  = strings.Repeat("a", 58)                                // cut to 58
	name70B  = strings.Repeat("a", 60) + " " + strings.Repeat("b", 8) + "c"
	name70D  = strings.Repeat("a", 57) + "--" + strings.Repeat("z", 11) // '-' at the 58 cut
	slug70D  = strings.Repeat("a", 57) + "-" + strings.Repeat("z", 5)
	slug70Ds = strings.Repeat("a", 57)
)

func TestBackfill(t *testing.T) {
	type row struct{ base, final string }
	for _, tc := range []struct {
		name      string
		claimants []admin.SlugClaimant
		held      []string
		want      []row
	}{
		{
			name:      "distinct names keep their bases",
			claimants: []admin.SlugClaimant{{Name: "vLLM Moscow"}, {Name: "vLLM SPb"}},
			want:      []row{{"vllm-moscow", "vllm-moscow"}, {"vllm-spb", "vllm-spb"}},
		},
		{
			name:      "later claimants get their row number",
			claimants: []admin.SlugClaimant{{Name: "vllm"}, {Name: "VLLM"}, {Name: "other"}, {Name: "v.l.l.m"}},
			want:      []row{{"vllm", "vllm"}, {"vllm", "vllm-2"}, {"other", "other"}, {"v-l-l-m", "v-l-l-m"}},
		},
		{
			name:      "three of one base",
			claimants: []admin.SlugClaimant{{Name: "openai api.openai.com/v1"}, {Name: "openai api.openai.com/v1"}, {Name: "openai api.openai.com/v1"}},
			want: []row{
				{"openai-api-openai-com-v1", "openai-api-openai-com-v1"},
				{"openai-api-openai-com-v1", "openai-api-openai-com-v1-2"},
				{"openai-api-openai-com-v1", "openai-api-openai-com-v1-3"},
			},
		},
		{
			name:      "existing providers hold their slugs and count as claimants",
			claimants: []admin.SlugClaimant{{Name: "vllm", Slug: "vllm"}, {Name: "vllm", Slug: "vllm-msk"}, {Name: "vllm"}},
			want:      []row{{"vllm", "vllm"}, {"vllm", "vllm-msk"}, {"vllm", "vllm-3"}},
		},
		{
			name:      "held base and base-2 are skipped",
			claimants: []admin.SlugClaimant{{Name: "vllm"}, {Name: "vllm"}},
			held:      []string{"vllm", "vllm-2"},
			want:      []row{{"vllm", "vllm-3"}, {"vllm", "vllm-4"}},
		},
		{
			name:      "existing providers on base and base-2",
			claimants: []admin.SlugClaimant{{Name: "vllm", Slug: "vllm"}, {Name: "vllm", Slug: "vllm-2"}, {Name: "vllm"}},
			want:      []row{{"vllm", "vllm"}, {"vllm", "vllm-2"}, {"vllm", "vllm-3"}},
		},
		{
			name:      "an unrelated holder of base-N pushes on",
			claimants: []admin.SlugClaimant{{Name: "a"}, {Name: "a"}, {Name: "a"}},
			held:      []string{"a-2"},
			want:      []row{{"a", "a"}, {"a", "a-3"}, {"a", "a-4"}},
		},
		{
			name:      "a bare base held by a group",
			claimants: []admin.SlugClaimant{{Name: "vllm cluster"}},
			held:      []string{"vllm-cluster"},
			want:      []row{{"vllm-cluster", "vllm-cluster-2"}},
		},
		{
			name:      "no letters or digits",
			claimants: []admin.SlugClaimant{{Name: "ÄÖÜ"}, {Name: "---"}, {Name: "provider"}},
			want:      []row{{"provider", "provider"}, {"provider", "provider-2"}, {"provider", "provider-3"}},
		},
		{
			name:      "70-character names",
			claimants: []admin.SlugClaimant{{Name: name70}, {Name: name70B}, {Name: name70}},
			want:      []row{{slug70, slug70}, {slug70, slug70s + "-2"}, {slug70, slug70s + "-3"}},
		},
		{
			name:      "a '-' at the 58 cut is trimmed",
			claimants: []admin.SlugClaimant{{Name: name70D}, {Name: name70D}},
			want:      []row{{slug70D, slug70D}, {slug70D, slug70Ds + "-2"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := admin.Backfill(tc.claimants, tc.held)
			rows := make([]row, len(got))
			for i, a := range got {
				rows[i] = row{a.Base, a.Final}
				if !slugPattern.MatchString(a.Final) {
					t.Errorf("claimant %d: final slug %q breaks the slug rule", i, a.Final)
				}
			}
			if !reflect.DeepEqual(rows, tc.want) {
				t.Errorf("Backfill:\n got %q\nwant %q", rows, tc.want)
			}
		})
	}
}

func TestBackfillLengths(t *testing.T) {
	if len(name70) != 70 || len(slug70) != 63 {
		t.Fatalf("test names are off: %d %d", len(name70), len(slug70))
	}
	got := admin.Backfill([]admin.SlugClaimant{{Name: name70}, {Name: name70}}, nil)
	if len(got[0].Final) != 63 || len(got[1].Final) != 60 || !strings.HasPrefix(got[1].Final, slug70s+"-") {
		t.Errorf("lengths: %q (%d), %q (%d)", got[0].Final, len(got[0].Final), got[1].Final, len(got[1].Final))
	}
	// Five-digit suffixes cut the base further so the slug stays at 63.
	var cs []admin.SlugClaimant
	for range 10001 {
		cs = append(cs, admin.SlugClaimant{Name: name70})
	}
	last := admin.Backfill(cs, nil)[10000].Final
	if last != strings.Repeat("a", 57)+"-10001" {
		t.Errorf("claimant 10001: %q", last)
	}
}

// TestBackfillDeterministic: the answer depends on the claimant order and
// the held set only, never on the order held slugs are listed in (they
// come from maps and queries).
func TestBackfillDeterministic(t *testing.T) {
	var cs []admin.SlugClaimant
	for i := range 40 {
		cs = append(cs, admin.SlugClaimant{Name: []string{"vllm", "openai api", "x", name70}[i%4]})
	}
	held := []string{"vllm-2", "x", "x-3", "openai-api-5", slug70s + "-4"}
	want := admin.Backfill(cs, held)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		h := append([]string(nil), held...)
		rng.Shuffle(len(h), func(i, j int) { h[i], h[j] = h[j], h[i] })
		if got := admin.Backfill(cs, h); !reflect.DeepEqual(got, want) {
			t.Fatalf("held order %q changed the answer", h)
		}
	}
}

func FuzzBackfill(f *testing.F) {
	f.Add("vllm", "vllm", "vllm-2", 3)
	f.Add(name70, name70B, slug70, 2)
	f.Add("", "ÄÖ", "provider", 1)
	f.Fuzz(func(t *testing.T, a, b, held string, n int) {
		n = max(1, min(n, 20))
		var cs []admin.SlugClaimant
		for i := range n {
			name := a
			if i%2 == 1 {
				name = b
			}
			cs = append(cs, admin.SlugClaimant{Name: name})
		}
		got := admin.Backfill(cs, []string{held, held + "-2"})
		seen := map[string]bool{held: true, held + "-2": true}
		for i, as := range got {
			if !slugPattern.MatchString(as.Final) {
				t.Fatalf("claimant %d: %q breaks the slug rule", i, as.Final)
			}
			if seen[as.Final] {
				t.Fatalf("claimant %d: %q assigned twice or held", i, as.Final)
			}
			seen[as.Final] = true
			if !strings.HasPrefix(as.Final, strings.TrimRight(as.Base[:min(len(as.Base), 50)], "-")) {
				t.Fatalf("claimant %d: %q does not start with its base %q", i, as.Final, as.Base)
			}
		}
		if !reflect.DeepEqual(got, admin.Backfill(cs, []string{held + "-2", held})) {
			t.Fatal("not deterministic")
		}
	})
}

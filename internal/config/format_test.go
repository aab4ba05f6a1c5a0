package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// TestFormatMatchesInputs: every file type has exactly the keys of the
// admin input it maps onto (the JSON names of the API), plus what only a
// file has, so that a field added to an input is not silently missing from
// config files.
func TestFormatMatchesInputs(t *testing.T) {
	for _, c := range []struct {
		file, input any
		fileOnly    []string
		nested      []string // the file's sub-resources, created on their own
		inputOnly   []string // what the file says in another way
	}{
		{Org{}, admin.DesiredOrg{}, nil, nil, nil},
		{Provider{}, admin.DesiredProvider{}, nil, nil, nil},
		// A key's ref is the name of its secret_env.
		{ProviderKey{}, admin.KeyInput{}, []string{"secret_env"}, nil, []string{"ref"}},
		{Group{}, admin.DesiredGroup{}, nil, nil, nil},
		{GroupMember{}, admin.GroupMemberInput{}, nil, nil, nil},
		{Project{}, admin.DesiredProject{}, nil, nil, nil},
		{Route{}, admin.RouteInput{}, nil, nil, nil},
		{Target{}, admin.TargetInput{}, nil, nil, nil},
		{VirtualKey{}, admin.VirtualKeyInput{}, nil, nil, nil},
		{Policy{}, store.Policy{}, nil, nil, nil},
		{Prices{}, admin.PricesInput{}, nil, nil, nil},
		{Budget{}, admin.BudgetInput{}, nil, nil, nil},
		{Host{}, admin.HostInput{}, nil, nil, nil},
		{Recipe{}, fleetapi.Recipe{}, nil, nil, nil},
		{VLLM{}, fleetapi.VLLM{}, nil, nil, nil},
		{Source{}, fleetapi.Source{}, nil, nil, nil},
	} {
		file := tagNames(reflect.TypeOf(c.file), "yaml")
		want := append(tagNames(reflect.TypeOf(c.input), "json"), c.fileOnly...)
		want = append(want, c.nested...)
		want = slices.DeleteFunc(want, func(k string) bool { return slices.Contains(c.inputOnly, k) })
		slices.Sort(want)
		if !slices.Equal(file, want) {
			t.Errorf("%T has keys %v, want %v (those of %T)", c.file, file, want, c.input)
		}
	}
}

// tagNames are the keys of a struct type, those of embedded structs
// included (as encoding/json promotes them).
func tagNames(t reflect.Type, key string) []string {
	var names []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get(key), ",")
		if f.Anonymous && name == "" {
			names = append(names, tagNames(f.Type, key)...)
			continue
		}
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// TestInputsCarryEveryField maps a file with every field set and compares
// with the inputs written out by hand.
func TestInputsCarryEveryField(t *testing.T) {
	w := 2
	exp := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	pol := Policy{MaxOutputTokens: 1, Tools: "deny", Media: "allow", MaxConcurrency: 2}
	spol := store.Policy{MaxOutputTokens: 1, Tools: "deny", Media: "allow", MaxConcurrency: 2}
	sk := secret.New("sk-test")

	p := Provider{
		Name: "n", Slug: "s", Kind: "openai", BaseURL: "https://x/v1", MetadataSource: "configured",
		ContextLimit: 9, Models: []string{"m"}, FirstByteTimeout: store.Duration(time.Second),
		IdleTimeout: store.Duration(time.Minute), ForwardHeaders: []string{"X-A"}, Policy: pol,
		Keys:   []ProviderKey{{Secret: sk, SecretEnv: "E", Weight: &w}},
		Prices: &Prices{Input: "0.1", Output: "0.2"},
	}
	wantP := admin.ProviderInput{
		Name: "n", Slug: "s", Kind: "openai", BaseURL: "https://x/v1", MetadataSource: "configured",
		ContextLimit: 9, Models: []string{"m"}, FirstByteTimeout: store.Duration(time.Second),
		IdleTimeout: store.Duration(time.Minute), ForwardHeaders: []string{"X-A"}, Policy: spol,
		Keys:   []admin.KeyInput{{Secret: sk, Weight: &w}},
		Prices: &admin.PricesInput{Input: "0.1", Output: "0.2"},
	}
	g := Group{Slug: "g", Name: "G", Strategy: "weighted", Policy: pol,
		Members: []GroupMember{{Provider: "s", Weight: &w, ModelMap: map[string]string{"a": "b"}}}}
	wantG := admin.GroupInput{Slug: "g", Name: "G", Strategy: "weighted", Policy: spol,
		Members: []admin.GroupMemberInput{{Provider: "s", Weight: &w, ModelMap: map[string]string{"a": "b"}}}}
	pj := Project{Name: "p", Description: "d", Budget: &Budget{Amount: "5", Period: "day"}, RPMLimit: 1, TPMLimit: 2}
	wantPj := admin.ProjectInput{Name: "p", Description: "d", Budget: &admin.BudgetInput{Amount: "5", Period: "day"}, RPMLimit: 1, TPMLimit: 2}
	r := Route{Model: "m", Strategy: "weighted", Policy: pol, RPMLimit: 3, TPMLimit: 4,
		Targets: []Target{{Provider: "s", UpstreamModel: "u", Weight: &w, ContextLimit: 7, Prices: &Prices{Input: "1", Output: "2"}}}}
	wantR := admin.RouteInput{Model: "m", Strategy: "weighted", Policy: spol, RPMLimit: 3, TPMLimit: 4,
		Targets: []admin.TargetInput{{Provider: "s", UpstreamModel: "u", Weight: &w, ContextLimit: 7, Prices: &admin.PricesInput{Input: "1", Output: "2"}}}}
	k := VirtualKey{Name: "k", Models: []string{"m"}, ExpiresAt: &exp, RPMLimit: 5, TPMLimit: 6, Budget: &Budget{Amount: "1", Period: "month"}}
	wantK := admin.VirtualKeyInput{Name: "k", Models: []string{"m"}, ExpiresAt: &exp, RPMLimit: 5, TPMLimit: 6, Budget: &admin.BudgetInput{Amount: "1", Period: "month"}}

	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"org", Org{Name: "o", Description: "d"}.input(), admin.OrgInput{Name: "o", Description: "d"}},
		{"provider", p.input(), wantP},
		{"group", g.input(), wantG},
		{"project", pj.input(), wantPj},
		{"route", r.input(), wantR},
		{"virtual key", k.input(), wantK},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: mapped to %+v, want %+v", c.name, c.got, c.want)
		}
	}
	if got := p.input().Keys[0].Secret.Reveal(); got != "sk-test" {
		t.Errorf("provider key secret not carried over")
	}
}

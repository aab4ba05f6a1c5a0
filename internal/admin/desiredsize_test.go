package admin_test

import (
	"encoding/json"
	"testing"

	"github.com/rolter/rolter/internal/admin"
)

// CheckDesiredJSON counts in the JSON what Desired.Entries counts once
// decoded: a desired state at the cap, of every kind, passes, and one
// entry more of any kind is refused.
func TestCheckDesiredJSONCountsAsEntries(t *testing.T) {
	full := func() admin.Desired {
		d := admin.Desired{Orgs: []admin.DesiredOrg{{
			Providers: []admin.DesiredProvider{{ProviderInput: admin.ProviderInput{Keys: make([]admin.KeyInput, 2)}}},
			Groups:    []admin.DesiredGroup{{GroupInput: admin.GroupInput{Members: make([]admin.GroupMemberInput, 3)}}},
			Projects: []admin.DesiredProject{{Routes: []admin.RouteInput{{Targets: make([]admin.TargetInput, 4)}},
				Keys: make([]admin.VirtualKeyInput, 5)}},
			Hosts: make([]admin.HostInput, 6),
		}}}
		d.Orgs = append(d.Orgs, make([]admin.DesiredOrg, admin.MaxApplyEntries-d.Entries())...)
		return d
	}
	check := func(what string, d admin.Desired) error {
		t.Helper()
		raw, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return admin.CheckDesiredJSON(raw)
	}
	if err := check("at the cap", full()); err != nil {
		t.Fatalf("%d entries: %v", full().Entries(), err)
	}
	for name, more := range map[string]func(d *admin.Desired){
		"org":      func(d *admin.Desired) { d.Orgs = append(d.Orgs, admin.DesiredOrg{}) },
		"provider": func(d *admin.Desired) { d.Orgs[0].Providers = append(d.Orgs[0].Providers, admin.DesiredProvider{}) },
		"pool key": func(d *admin.Desired) {
			d.Orgs[0].Providers[0].Keys = append(d.Orgs[0].Providers[0].Keys, admin.KeyInput{})
		},
		"group": func(d *admin.Desired) { d.Orgs[0].Groups = append(d.Orgs[0].Groups, admin.DesiredGroup{}) },
		"member": func(d *admin.Desired) {
			d.Orgs[0].Groups[0].Members = append(d.Orgs[0].Groups[0].Members, admin.GroupMemberInput{})
		},
		"project": func(d *admin.Desired) { d.Orgs[0].Projects = append(d.Orgs[0].Projects, admin.DesiredProject{}) },
		"route": func(d *admin.Desired) {
			d.Orgs[0].Projects[0].Routes = append(d.Orgs[0].Projects[0].Routes, admin.RouteInput{})
		},
		"target": func(d *admin.Desired) {
			r := &d.Orgs[0].Projects[0].Routes[0]
			r.Targets = append(r.Targets, admin.TargetInput{})
		},
		"virtual key": func(d *admin.Desired) {
			d.Orgs[0].Projects[0].Keys = append(d.Orgs[0].Projects[0].Keys, admin.VirtualKeyInput{})
		},
		"host": func(d *admin.Desired) { d.Orgs[0].Hosts = append(d.Orgs[0].Hosts, admin.HostInput{}) },
	} {
		d := full()
		more(&d)
		if d.Entries() != admin.MaxApplyEntries+1 {
			t.Fatalf("one more %s: Entries() = %d", name, d.Entries())
		}
		if ae := admin.AsError(check(name, d)); ae == nil || ae.Code != admin.CodeTooManyEntries {
			t.Errorf("one more %s: %v", name, ae)
		}
	}
	// Lists elsewhere (models, names in strings) are no entries.
	if err := admin.CheckDesiredJSON([]byte(`{"orgs":[{"name":"orgs","providers":[{"models":["orgs","keys"]}]}],"x":[[],[]]}`)); err != nil {
		t.Fatal(err)
	}
}

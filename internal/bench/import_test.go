package bench

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/config"
)

// The import scenario's file is a valid rolter config file of the size it
// claims: its entries counted as the apply bound counts them, every route
// with one or two targets naming providers of the file.
func TestImportFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "import.yaml")
	entries, err := writeImportFile(path, 25, 4)
	if err != nil {
		t.Fatal(err)
	}
	f, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d := f.Desired()
	if n := d.Entries(); n != entries || n != 1+2*4+1+25+13*2+12 {
		t.Fatalf("Entries() = %d, writeImportFile said %d", n, entries)
	}
	o := d.Orgs[0]
	slugs := map[string]bool{}
	for _, p := range o.Providers {
		slugs[p.Name] = true
	}
	for _, r := range o.Projects[0].Routes {
		if len(r.Targets) < 1 || len(r.Targets) > 2 {
			t.Fatalf("route %s: %d targets", r.Model, len(r.Targets))
		}
		for _, tg := range r.Targets {
			if !slugs[tg.Provider] {
				t.Fatalf("route %s names %s, not a provider of the file", r.Model, tg.Provider)
			}
		}
	}
}

// "import" is a scenario of its own and of "all", and its figure meets the
// target at 10 s or less.
func TestImportScenarioReported(t *testing.T) {
	for _, names := range [][]string{{"import"}, {"all"}} {
		sel, err := selectScenarios(names, 64)
		if err != nil || !sel.imp {
			t.Fatalf("%v: import selected %v, %v", names, sel.imp, err)
		}
	}
	if sel, _ := selectScenarios([]string{"default"}, 64); sel.imp {
		t.Fatal("default selects import")
	}
	const name = "rolter import of 10,000 routes over 1,000 providers into an empty SQLite store"
	for wall, want := range map[float64]bool{4.2: true, 10.5: false} {
		r := &Report{Import: &ImportResult{Routes: importRoutes, Providers: importProviders, Entries: 27002, WallS: wall, CPUS: 2}}
		r.evaluate(64)
		var met *bool
		for _, tr := range r.Targets {
			if tr.Name == name {
				met = tr.Met
			}
		}
		if met == nil || *met != want {
			t.Fatalf("%.1f s: met = %v, want %v", wall, met, want)
		}
		var out bytes.Buffer
		r.Print(&out)
		if !strings.Contains(out.String(), "import: 10000 routes over 1000 providers") {
			t.Fatalf("text report lacks the import:\n%s", out.String())
		}
	}
}

package config_test

import (
	"testing"

	"github.com/rolter/rolter/internal/config"
)

// TestPricesAndBudgetsYAML: prices and budgets read from YAML as written,
// numbers or strings, for the same checks as the API.
func TestPricesAndBudgetsYAML(t *testing.T) {
	f, err := config.Parse([]byte(`
orgs:
  - name: acme
    providers:
      - name: p
        kind: openai
        base_url: https://api.example.com/v1
        prices: {input: 0.15, output: "0.6"}
    projects:
      - name: web
        budget: {amount: 100, period: month}
        routes:
          - model: m
            targets:
              - provider: p
                prices: {input: 3, output: 15}
        keys:
          - name: alice
            budget: {amount: 2.5, period: day}
`))
	if err != nil {
		t.Fatal(err)
	}
	o := f.Orgs[0]
	pj := o.Projects[0]
	if pr := o.Providers[0].Prices; pr == nil || pr.Input != "0.15" || pr.Output != "0.6" {
		t.Fatalf("provider prices %+v", pr)
	}
	if b := pj.Budget; b == nil || b.Amount != "100" || b.Period != "month" {
		t.Fatalf("project budget %+v", b)
	}
	if pr := pj.Routes[0].Targets[0].Prices; pr == nil || pr.Input != "3" || pr.Output != "15" {
		t.Fatalf("target prices %+v", pr)
	}
	if b := pj.Keys[0].Budget; b == nil || b.Amount != "2.5" || b.Period != "day" {
		t.Fatalf("key budget %+v", b)
	}
}

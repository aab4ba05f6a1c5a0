package admin

import (
	"bytes"
	"encoding/json"

	"github.com/rolter/rolter/internal/money"
	"github.com/rolter/rolter/internal/store"
)

// PricesInput are token prices in USD per million tokens, as decimal
// numbers (JSON numbers or strings, exact to six decimals): a provider's,
// or a route target's override of its provider's. Both are required.
type PricesInput struct {
	Input  Decimal `json:"input"`
	Output Decimal `json:"output"`
}

// BudgetInput caps what a key or a project may spend per UTC calendar
// period: amount in USD (exact to nine decimals), period "day", "week"
// (from Monday) or "month".
type BudgetInput struct {
	Amount Decimal `json:"amount"`
	Period string  `json:"period"`
}

// Decimal is a money figure as written: a JSON number or a string (or a
// config file's scalar), kept as text so that it is parsed exactly (package
// money) and so that a bad value is reported under its field name by the
// checks below.
type Decimal string

func (d *Decimal) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*d = Decimal(s)
		return nil
	}
	if len(b) > 0 && (b[0] == '-' || b[0] >= '0' && b[0] <= '9') {
		*d = Decimal(b)
		return nil
	}
	*d = "?" // not a number: the check names the field
	return nil
}

// nullable is a PATCH field that tells absent (Set false) from null (Set,
// Value nil), so that null can clear what absent leaves alone.
type nullable[T any] struct {
	Set   bool
	Value *T
}

func (n *nullable[T]) UnmarshalJSON(b []byte) error {
	n.Set = true
	if string(b) == "null" {
		n.Value = nil
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	n.Value = new(T)
	return dec.Decode(n.Value)
}

// checkPrices validates in under field; nil in is no price.
func checkPrices(fe fieldErrors, field string, in *PricesInput) *store.Prices {
	if in == nil {
		return nil
	}
	var p store.Prices
	for _, c := range []struct {
		name string
		v    Decimal
		dst  *money.Price
	}{{"input", in.Input, &p.Input}, {"output", in.Output, &p.Output}} {
		if c.v == "" {
			fe.add(field+"."+c.name, "is required: USD per million tokens, e.g. 0.15 (0 for free)")
			continue
		}
		v, err := money.ParsePrice(string(c.v))
		if err != nil {
			fe.add(field+"."+c.name, "%s (USD per million tokens)", err)
		}
		*c.dst = v
	}
	return &p
}

// checkBudget validates in under field; nil in is no budget.
func checkBudget(fe fieldErrors, field string, in *BudgetInput) store.Budget {
	if in == nil {
		return store.Budget{}
	}
	var b store.Budget
	switch in.Period {
	case store.PeriodDay, store.PeriodWeek, store.PeriodMonth:
		b.Period = in.Period
	default:
		fe.add(field+".period", `must be "day", "week" or "month" (UTC calendar periods)`)
	}
	if in.Amount == "" {
		fe.add(field+".amount", "is required: USD, e.g. 10.50")
		return b
	}
	v, err := money.ParseAmount(string(in.Amount))
	if err != nil {
		fe.add(field+".amount", "%s (USD)", err)
	}
	b.Amount = v
	return b
}

// budgetInput turns a stored budget back into input (a key PATCH
// re-validates what it keeps); nil when there is none.
func budgetInput(b store.Budget) *BudgetInput {
	if b.Period == "" {
		return nil
	}
	return &BudgetInput{Amount: Decimal(b.Amount.USD()), Period: b.Period}
}

// budgetView shows a budget; nil when there is none.
func budgetView(b store.Budget) *store.Budget {
	if b.Period == "" {
		return nil
	}
	return &b
}

// pricesInput turns stored prices back into input (a PATCH that keeps a
// route's targets re-validates them).
func pricesInput(p *store.Prices) *PricesInput {
	if p == nil {
		return nil
	}
	return &PricesInput{Input: Decimal(p.Input.PerMillion()), Output: Decimal(p.Output.PerMillion())}
}

// Package money holds rolter's two currency quantities as integers, so that
// sums never drift the way binary floats do. The gateway has one currency,
// USD.
//
//   - Amount is nano-USD (1e-9 USD): request costs, budgets and usage sums.
//     int64 holds up to about 9.2 billion USD.
//   - Price is micro-USD per million tokens, which is the same number as
//     pico-USD per token: "$0.15 per million tokens" is Price(150000). Six
//     decimals of a per-million price cover every published price.
//
// Both read and write as exact decimal numbers in USD (JSON numbers or
// strings, YAML scalars): the text is parsed digit by digit, never through
// a float.
package money

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Amount is a sum of money in nano-USD.
type Amount int64

// Price is a token price in micro-USD per million tokens (pico-USD per
// token).
type Price int64

// Bounds on what an operator may configure. MaxPrice ($10,000 per million
// tokens) keeps a request's cost inside int64 for any token count a request
// can carry (see Cost).
const (
	MaxPrice  Price  = 10_000 * 1_000_000
	MaxAmount Amount = 1_000_000_000 * 1_000_000_000 // one billion USD
)

// Cost is what prompt input tokens and completion output tokens cost at
// prices in and out, rounded to the nearest nano-USD. Token counts are
// clamped to 1e8 each, so the sum of products stays below 2e18, inside
// int64, for prices up to MaxPrice.
func Cost(prompt, completion int, in, out Price) Amount {
	p, c := clamp(prompt), clamp(completion)
	pico := p*int64(min(in, MaxPrice)) + c*int64(min(out, MaxPrice)) // pico-USD
	return Amount((pico + 500) / 1000)
}

func clamp(n int) int64 { return int64(max(0, min(n, 100_000_000))) }

// USD returns a as a decimal string of USD without trailing zeros: "0.15",
// "12", "0.000000003".
func (a Amount) USD() string { return decimal(int64(a), 9) }

// PerMillion returns p as a decimal string of USD per million tokens.
func (p Price) PerMillion() string { return decimal(int64(p), 6) }

func (a Amount) MarshalJSON() ([]byte, error) { return []byte(a.USD()), nil }
func (p Price) MarshalJSON() ([]byte, error)  { return []byte(p.PerMillion()), nil }
func (a Amount) MarshalText() ([]byte, error) { return []byte(a.USD()), nil }
func (p Price) MarshalText() ([]byte, error)  { return []byte(p.PerMillion()), nil }

// UnmarshalJSON reads a JSON number or a string holding one.
func (a *Amount) UnmarshalJSON(b []byte) error {
	v, err := parse(unquote(b), 9, int64(MaxAmount))
	if err != nil {
		return err
	}
	*a = Amount(v)
	return nil
}

func (p *Price) UnmarshalJSON(b []byte) error {
	v, err := parse(unquote(b), 6, int64(MaxPrice))
	if err != nil {
		return err
	}
	*p = Price(v)
	return nil
}

// UnmarshalText serves YAML and query strings.
func (a *Amount) UnmarshalText(b []byte) error { return a.UnmarshalJSON(b) }
func (p *Price) UnmarshalText(b []byte) error  { return p.UnmarshalJSON(b) }

// ParseAmount reads a decimal USD amount ("10", "0.25").
func ParseAmount(s string) (Amount, error) {
	v, err := parse(s, 9, int64(MaxAmount))
	return Amount(v), err
}

// ParsePrice reads a decimal price in USD per million tokens.
func ParsePrice(s string) (Price, error) {
	v, err := parse(s, 6, int64(MaxPrice))
	return Price(v), err
}

// PriceFromPerToken converts a USD-per-token figure (LiteLLM's
// input_cost_per_token, a float in its YAML) to a Price, rounding to the
// nearest micro-USD per million tokens.
func PriceFromPerToken(usd float64) (Price, error) {
	if math.IsNaN(usd) || usd < 0 || usd*1e12 > float64(MaxPrice) {
		return 0, fmt.Errorf("price %v per token is out of range (0 to %s per million tokens)", usd, MaxPrice.PerMillion())
	}
	return Price(math.Round(usd * 1e12)), nil
}

func unquote(b []byte) string {
	s := string(b)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

var errFormat = errors.New("must be a non-negative decimal number of USD, e.g. 0.15")

// parse reads a non-negative decimal with at most scale fractional digits
// as an integer count of 10^-scale units, refusing values above max.
func parse(s string, scale int, maxV int64) (int64, error) {
	intPart, frac, dot := strings.Cut(s, ".")
	if intPart == "" || (dot && frac == "") || !digits(intPart) || !digits(frac) {
		return 0, errFormat
	}
	frac = strings.TrimRight(frac, "0")
	if len(frac) > scale {
		return 0, fmt.Errorf("has more than %d decimal places", scale)
	}
	unit := int64(math.Pow10(scale))
	n, err := strconv.ParseInt(intPart, 10, 64)
	if err != nil || n > maxV/unit {
		return 0, fmt.Errorf("is above the maximum %s", decimal(maxV, scale))
	}
	f := int64(0)
	if frac != "" {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", scale-len(frac)), 10, 64)
	}
	v := n*unit + f
	if v > maxV {
		return 0, fmt.Errorf("is above the maximum %s", decimal(maxV, scale))
	}
	return v, nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// decimal formats v units of 10^-scale without trailing zeros.
func decimal(v int64, scale int) string {
	neg := v < 0
	u := uint64(v)
	if neg {
		u = uint64(-v)
	}
	unit := uint64(math.Pow10(scale))
	s := strconv.FormatUint(u/unit, 10)
	if f := u % unit; f != 0 {
		fs := strconv.FormatUint(f, 10)
		fs = strings.Repeat("0", scale-len(fs)) + fs
		s += "." + strings.TrimRight(fs, "0")
	}
	if neg {
		s = "-" + s
	}
	return s
}

package money

import (
	"encoding/json"
	"testing"
)

func TestParseFormat(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Price
		out  string
	}{
		{"0.15", 150000, "0.15"},
		{"0", 0, "0"},
		{"3", 3000000, "3"},
		{"0.000001", 1, "0.000001"},
		{"2.500000", 2500000, "2.5"},
		{"10000", MaxPrice, "10000"},
	} {
		p, err := ParsePrice(c.in)
		if err != nil || p != c.want || p.PerMillion() != c.out {
			t.Errorf("ParsePrice(%q) = %d, %v, %q; want %d, %q", c.in, p, err, p.PerMillion(), c.want, c.out)
		}
	}
	for _, bad := range []string{"", "-1", "1e3", "0.0000001", ".5", "5.", "10000.000001", "abc", "1 ", "99999999999999999999"} {
		if p, err := ParsePrice(bad); err == nil {
			t.Errorf("ParsePrice(%q) = %d, want an error", bad, p)
		}
	}
	a, err := ParseAmount("12.000000003")
	if err != nil || a != 12_000_000_003 || a.USD() != "12.000000003" {
		t.Errorf("ParseAmount = %d %v %q", a, err, a.USD())
	}
}

func TestJSON(t *testing.T) {
	var v struct {
		P Price  `json:"p"`
		Q Price  `json:"q"`
		A Amount `json:"a"`
	}
	// A float would read 0.1 + 0.2 as 0.30000000000000004; these are exact.
	if err := json.Unmarshal([]byte(`{"p": 0.1, "q": "0.2", "a": 0.3}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.P+v.Q != 300000 || v.A != 300_000_000 {
		t.Fatalf("got %+v", v)
	}
	b, _ := json.Marshal(v)
	if string(b) != `{"p":0.1,"q":0.2,"a":0.3}` {
		t.Fatalf("marshal = %s", b)
	}
	if err := json.Unmarshal([]byte(`{"p": -0.1}`), &v); err == nil {
		t.Fatal("a negative price was accepted")
	}
}

func TestCost(t *testing.T) {
	// 1,000 prompt tokens at $0.15/M and 500 completion tokens at $0.60/M:
	// 0.00015 + 0.0003 = $0.00045.
	if c := Cost(1000, 500, 150000, 600000); c != 450_000 || c.USD() != "0.00045" {
		t.Fatalf("Cost = %d (%s)", c, c.USD())
	}
	// One token at $0.0375/M is 37.5 nano-USD: rounded half up.
	if c := Cost(1, 0, 37500, 0); c != 38 {
		t.Fatalf("Cost = %d", c)
	}
	if c := Cost(1e12, 1e12, MaxPrice*2, MaxPrice*2); c <= 0 {
		t.Fatalf("Cost overflowed: %d", c)
	}
	if p, err := PriceFromPerToken(1.5e-07); err != nil || p.PerMillion() != "0.15" {
		t.Fatalf("PriceFromPerToken = %v %v", p, err)
	}
}

package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
)

// FuzzJSONCheck holds jsonCheck to json.Valid.
func FuzzJSONCheck(f *testing.F) {
	for _, s := range []string{
		``, ` `, `{}`, `[]`, `{"a":[1,-0.5e+3,0,1E2,true,false,null,"x\"y\u2028"]}`,
		`01`, `-`, `1.`, `1e`, `1e+`, `-0`, `0.0e-0`, `"\u12"`, `"\x"`, "\"\x01\"", "\"\xff\"",
		`{"a" 1}`, `{"a":1,}`, `[1,]`, `{,}`, `[1 2]`, `tru`, `nul`, `falsey`, ` 1 `, `{} {}`, `}`, `]`,
		strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth),
		strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
		strings.Repeat(`{"a":`, maxDepth) + "1" + strings.Repeat("}", maxDepth),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid = %v", b, got, want)
		}
	})
}

// FuzzArgs holds writer.args, which reads tool call arguments as they are
// decoded, to what the translation did with the decoded text: trim Unicode
// space, accept nothing or a JSON object, write it compacted.
func FuzzArgs(f *testing.F) {
	for _, s := range []string{
		``, " \u00a0\v\u3000 ", `{}`, " \u00a0{ \"a\" : [1, \"x y\"] }\v\u3000", `{"a":"\u0001"}`,
		"{\"a\":\"\xff\"}", `{} {}`, `[1]`, `{"a":01}`, "{\"a\":1}\u0085", "{\"a\":\u00a01}",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, text string, ascii bool) {
		// The JSON string the body holds: with HTML characters escaped,
		// or everything beyond ASCII as \u escapes.
		tok, _ := json.Marshal(text)
		if ascii {
			var b bytes.Buffer
			for _, r := range string(tok) { // json.Marshal wrote valid UTF-8
				switch {
				case r < 0x80:
					b.WriteRune(r)
				case r > 0xFFFF:
					r1, r2 := utf16.EncodeRune(r)
					fmt.Fprintf(&b, `\u%04x\u%04X`, r1, r2)
				default:
					fmt.Fprintf(&b, `\u%04x`, r)
				}
			}
			tok = b.Bytes()
		}
		var decoded string
		if err := json.Unmarshal(tok, &decoded); err != nil {
			t.Fatalf("%s: %v", tok, err)
		}
		trimmed := strings.TrimSpace(decoded)
		wantEmpty := trimmed == ""
		wantOK := wantEmpty || isJSONObject([]byte(trimmed))

		c := writer{count: true}
		empty, ok := c.args(tok)
		if empty != wantEmpty || ok != wantOK {
			t.Fatalf("args(%s) = empty %v ok %v, want %v %v", tok, empty, ok, wantEmpty, wantOK)
		}
		if !ok || empty {
			return
		}
		w := writer{b: make([]byte, 0, c.n)}
		w.args(tok)
		var want bytes.Buffer
		if err := json.Compact(&want, []byte(trimmed)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(w.b, want.Bytes()) || len(w.b) != c.n {
			t.Fatalf("args(%s) wrote %q (counted %d), want %q", tok, w.b, c.n, want.Bytes())
		}
	})
}

// TestFitsFloat64 holds fitsFloat64 to strconv.ParseFloat on long numbers
// around the largest float64 and its rounding bound 2^1024 - 2^970.
func TestFitsFloat64(t *testing.T) {
	bound := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 1024), new(big.Int).Lsh(big.NewInt(1), 970))
	maxf := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 1024), new(big.Int).Lsh(big.NewInt(1), 971))
	var nums []string
	for _, n := range []*big.Int{bound, maxf, new(big.Int).Lsh(big.NewInt(1), 1024)} {
		for _, d := range []int64{-1, 0, 1} {
			s := new(big.Int).Add(n, big.NewInt(d)).String()
			nums = append(nums, s, "-"+s, s+".0", s+".999999999999999999999999", s+"."+strings.Repeat("9", 400),
				"0."+s+"e309", "0.000"+s+"e312", s[:1]+"."+s[1:]+"e308", s[:100]+"."+s[100:]+"e100",
				"0.0000"+s[:1]+strings.Repeat("0", 600)+"e+0000905", s+"e-1", s+"E-0")
		}
	}
	nums = append(nums, "0."+strings.Repeat("0", 100), strings.Repeat("9", 65), "1"+strings.Repeat("0", 308),
		"1"+strings.Repeat("0", 309), "1"+strings.Repeat("0", 100)+"e99999999999999999999999999",
		"1"+strings.Repeat("0", 100)+"e-99999999999999999999999999", "0."+strings.Repeat("0", 100)+"1e410")
	for _, s := range nums {
		if !json.Valid([]byte(s)) {
			t.Fatalf("%s is not JSON", s)
		}
		_, err := strconv.ParseFloat(s, 64)
		if got := fitsFloat64([]byte(s)); got != (err == nil) {
			t.Errorf("fitsFloat64(%.40s... len %d) = %v, ParseFloat err = %v", s, len(s), got, err)
		}
	}
}

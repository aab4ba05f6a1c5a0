package gateway

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/resolve"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
)

// bigChatBody is a streamed chat request of about size bytes: a system
// message and alternating user and assistant turns of prose, with a
// max_tokens above the route's ceiling and no stream_options, so that every
// edit the request path makes (model, limit clamp, usage option) applies.
func bigChatBody(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"bench","stream":true,"temperature":0.7,"max_tokens":8192,"messages":[{"role":"system","content":"You are a helpful assistant."}`)
	turn := strings.Repeat(`The quick brown fox jumps over the lazy dog; naïve café \"quotes\" and a newline\n. `, 40)
	for i := 0; b.Len() < size-len(turn)-100; i++ {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		fmt.Fprintf(&b, `,{"role":%q,"content":"%s"}`, role, turn)
	}
	b.WriteString(`],"top_p":0.9}`)
	return []byte(b.String())
}

// requestPathEnv is a gateway and a one-target plan whose target renames
// the model and whose policy has an output ceiling, in front of nothing:
// BenchmarkRequestPath stops where the body would be sent.
func requestPathEnv() (*Gateway, *routePlan) {
	g := New(Config{}, snapshot.NewHolder(nil, nil), Options{})
	p := &providerRT{id: 1, slug: "p", kind: "vllm", pairs: pairingsFor("vllm"), base: "http://127.0.0.1:1", contextLimit: 1 << 20,
		policy: store.Policy{MaxOutputTokens: 4096}}
	tg := &targetRT{id: targetID{provider: 1, model: "upstream-model"}, provider: p, configured: true}
	return g, &routePlan{kind: resolve.KindRoute, route: "bench", targets: []*targetRT{tg}, weights: []int{1}}
}

// BenchmarkRequestPath is everything the gateway does to a 1 MiB streamed
// chat body between reading it and sending it: parse (model, stream flag),
// admission (policy inspection, the output ceiling, context), the token
// estimate for rate limits, the usage option, and one attempt's model
// rewrite.
func BenchmarkRequestPath(b *testing.B) {
	body := bigChatBody(1 << 20)
	g, plan := requestPathEnv()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		x := &exchange{endpoint: "/chat/completions", plan: plan}
		if e := x.parse(body); e != nil {
			b.Fatal(e.Message)
		}
		if _, e := g.admit(x); e != nil {
			b.Fatal(e.Message)
		}
		if x.estimateTokens() == 0 {
			b.Fatal("no estimate")
		}
		if e := x.translate(x.translateInput()); e != nil {
			b.Fatal(e.Message)
		}
		x.addedUsage = x.body.usageEdit(x.endpoint)
		sent := x.body.splice(plan.targets[0].id.model, x.clampFor(0))
		if !x.addedUsage || len(sent) <= len(body) {
			b.Fatal("request not rewritten")
		}
	}
}

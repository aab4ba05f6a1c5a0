package litellm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rolter/rolter/internal/netguard"
	"github.com/rolter/rolter/internal/store"
)

// The llama.cpp probe (Options.Probe, `rolter import --probe`).
//
// LiteLLM configs reach llama.cpp servers as "openai/<model>" with an
// api_base, so they import as openai-kind providers. rolter's llamacpp
// kind serves the same API and also reads the server's health and context
// (docs/metadata.md), so it is the better kind for them; the file cannot
// say which servers those are, but the servers can: llama.cpp answers
// GET /props, at the server root beside /v1, with its generation
// settings. The probe asks each openai-kind provider with an address of
// its own, and the report suggests kind llamacpp for those that answer.
// It only suggests: the import creates what the file says.
//
// The probe is opt-in, in a dry run too: otherwise an import makes no
// request to an upstream, and a dry run writes nothing and connects to
// nothing. Each request is bounded (probeTimeout), goes through the
// gateway's guarded dialer (no link-local or metadata addresses), follows
// no redirect, reads at most maxPropsBody, and carries the provider's key
// only to the provider's own address, as the gateway would. A provider
// that does not answer is simply not suggested.

// probeTimeout bounds one probe: connecting, asking and reading.
const probeTimeout = 3 * time.Second

// probeParallel is how many providers are probed at once.
const probeParallel = 4

// maxPropsBody bounds the /props answer the probe reads.
const maxPropsBody = 1 << 20

// probe returns one suggestion per provider that answers as llama.cpp
// does, in plan order.
func probe(ctx context.Context, provs []*Provider, timeout time.Duration) []string {
	tr := &http.Transport{Proxy: nil, DialContext: netguard.Dialer(false).DialContext}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	found := make([]bool, len(provs))
	sem := make(chan struct{}, probeParallel)
	var wg sync.WaitGroup
	for i, p := range provs {
		if !probeable(p) {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			found[i] = answersProps(ctx, client, p)
		}()
	}
	wg.Wait()
	var out []string
	for i, p := range provs {
		if found[i] {
			out = append(out, fmt.Sprintf("suggestion: provider %s (%s) answers GET /props as a llama.cpp server does: with kind llamacpp rolter also reads its health and context (rolter providers update %s --kind llamacpp)",
				p.Slug, entries(p.Entries), p.Slug))
		}
	}
	return out
}

// probeable: an openai-kind provider (as the store has it, for one that
// exists) with an address of its own.
func probeable(p *Provider) bool {
	kind := p.Kind
	if p.Exists {
		kind = p.storeKind
	}
	return kind == store.KindOpenAI && !p.BaseUnset && p.BaseURL != defaultBases[store.KindOpenAI]
}

// answersProps reports whether GET <root>/props answers 200 with a JSON
// object holding default_generation_settings, as llama.cpp's does.
func answersProps(ctx context.Context, client *http.Client, p *Provider) bool {
	root := strings.TrimSuffix(p.BaseURL, "/v1")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, root+"/props", nil)
	if err != nil {
		return false
	}
	if !p.Key.IsZero() {
		req.Header.Set("Authorization", "Bearer "+p.Key.Reveal())
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	var doc struct {
		Settings map[string]any `json:"default_generation_settings"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxPropsBody)).Decode(&doc); err != nil {
		return false
	}
	return doc.Settings != nil
}

package ui

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/store"
)

// BenchmarkUsagePage measures the server time of the Usage page over a day
// of usage: with usageDetailCap records (the most for which errors and
// latency are read record by record) and with one more (counts only, from
// the summary), each over 40 routes, so the charts fold into "other".
//
//	go test ./internal/ui -run '^$' -bench UsagePage -benchtime 10x
func BenchmarkUsagePage(b *testing.B) {
	for _, n := range []int{usageDetailCap, usageDetailCap + 1} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			h := newHarness(b, Options{})
			ctx := context.Background()
			org, err := h.db.GetOrg(ctx, "default")
			if err != nil {
				b.Fatal(err)
			}
			pj, err := h.db.GetProject(ctx, org.ID, "default")
			if err != nil {
				b.Fatal(err)
			}
			recs := make([]store.UsageRecord, n)
			for i := range recs {
				route := fmt.Sprintf("route-%02d", i%40)
				recs[i] = store.UsageRecord{CreatedAt: h.clock.Now().Add(-time.Duration(i%86_000+1) * time.Second), OrgID: org.ID,
					ProjectID: pj.ID, KeyID: int64(i%7 + 1), AddressKind: "route", Address: route, Route: route, ProviderSlug: "p",
					Status: 200, Attempts: 1, Latency: time.Duration(i%900) * time.Millisecond, PromptTokens: 100, CompletionTokens: 50}
			}
			if err := h.db.InsertUsage(ctx, recs); err != nil {
				b.Fatal(err)
			}
			scope, ok := h.svc.Authorize(h.token)
			if !ok {
				b.Fatal("token not authorized")
			}
			_, id := h.ui.sessions.create(secretOf(h.token), scope)
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, "/ui/usage?org=default", nil)
				req.AddCookie(&http.Cookie{Name: CookieName, Value: id})
				w := httptest.NewRecorder()
				h.ui.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("%d %s", w.Code, w.Body.String())
				}
			}
		})
	}
}

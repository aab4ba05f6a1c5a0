package adminapi_test

import (
	"context"
	"io"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/adminapi"
)

// emptyList is n empty objects, comma-separated.
func emptyList(n int) string { return strings.TrimSuffix(strings.Repeat("{},", n), ",") }

// allocated is what fn allocates, in MiB: an upper bound of the heap it
// grows (the test's own requests included).
func allocated(fn func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) >> 20
}

// POST /apply is bounded before it is decoded: the body at 8 MiB, the
// entries at admin.MaxApplyEntries, counted in the JSON, so that 8 MiB of
// empty entries ({},{},...), which once decoded into gigabytes, is
// refused having allocated a few tens of MiB (the body read), and the
// largest accepted body of empty entries costs at most 160 MiB more.
func TestApplyBodyBounds(t *testing.T) {
	e := newEnv(t, "sqlite", nil)
	const maxBody = 8 << 20
	e.fail("POST", "/apply", `{"orgs":[{"name":"`+strings.Repeat("a", maxBody)+`"}]}`, 413, admin.CodeBodyTooLarge)
	before := e.state()
	lists := map[string][2]string{
		"orgs":      {`{"orgs":[`, `]}`},
		"providers": {`{"orgs":[{"name":"a","providers":[`, `]}]}`},
		"pool keys": {`{"orgs":[{"name":"a","providers":[{"name":"p","keys":[`, `]}]}]}`},
		"groups":    {`{"orgs":[{"name":"a","groups":[`, `]}]}`},
		"members":   {`{"orgs":[{"name":"a","groups":[{"name":"g","members":[`, `]}]}]}`},
		"projects":  {`{"orgs":[{"name":"a","projects":[`, `]}]}`},
		"routes":    {`{"orgs":[{"name":"a","projects":[{"name":"p","routes":[`, `]}]}]}`},
		"targets":   {`{"orgs":[{"name":"a","projects":[{"name":"p","routes":[{"model":"m","targets":[`, `]}]}]}]}`},
		"keys":      {`{"ORGS":[{"name":"a","Projects":[{"name":"p","KEYS":[`, `]}]}]}`}, // keys match in any case, as decoding does
		"hosts":     {`{"orgs":[{"name":"a","hosts":[`, `]}]}`},
	}
	for name, l := range lists {
		fit := (maxBody - len(l[0]) - len(l[1])) / 3
		mib := allocated(func() { e.fail("POST", "/apply", l[0]+emptyList(fit)+l[1], 400, admin.CodeTooManyEntries) })
		t.Logf("%s: 8 MiB of %d empty entries refused, %d MiB allocated", name, fit, mib)
		if mib > 64 {
			t.Errorf("%s: refusing 8 MiB of empty entries allocated %d MiB", name, mib)
		}
		// The largest accepted: the rest of the cap (less the org, the
		// provider, group, project or route above the list).
		above := strings.Count(l[0], "[") - 1
		mib = allocated(func() {
			e.fail("POST", "/apply", l[0]+emptyList(admin.MaxApplyEntries-above+1)+l[1], 400, admin.CodeTooManyEntries)
			code, out := e.do("POST", "/apply", l[0]+emptyList(admin.MaxApplyEntries-above)+l[1])
			if code != 400 || strings.Contains(out, admin.CodeTooManyEntries) {
				t.Errorf("%s: %d entries: %d %.200s", name, admin.MaxApplyEntries, code, out)
			}
		})
		t.Logf("%s: %d empty entries (accepted, then invalid), and one more (refused): %d MiB allocated", name, admin.MaxApplyEntries, mib)
		// 50,000 empty providers, the largest entry, allocate about 100
		// MiB in all, most of it the decoder growing their list.
		if mib > 160 {
			t.Errorf("%s: %d empty entries allocated %d MiB", name, admin.MaxApplyEntries, mib)
		}
	}
	e.fail("POST", "/apply", strings.Repeat(`{"orgs":[`, 40)+strings.Repeat(`]}`, 40), 400, admin.CodeInvalidJSON)
	if after := e.state(); after != before {
		t.Fatal("a refused apply wrote")
	}
}

// An apply stopped before it committed, because its caller left or its
// deadline passed, answers 503 with its own code and is logged as a
// warning, not as an internal error; so is any write whose caller left.
func TestApplyStoppedIsNoInternalError(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		serve := func(method, path, body string, ctx context.Context) (int, string) {
			req := httptest.NewRequestWithContext(ctx, method, adminapi.Prefix+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+adminToken)
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			adminapi.NewHandler(e.svc).ServeHTTP(rec, req)
			return rec.Code, rec.Body.String()
		}
		canceled, cancel := context.WithCancel(context.Background())
		cancel()
		before := e.state()
		e.logs.Reset()
		for _, c := range []struct {
			method, path, body, code string
			ctx                      context.Context
			timeout                  time.Duration
		}{
			{"POST", "/apply", `{"orgs":[{"name":"acme"}]}`, admin.CodeCanceled, canceled, admin.ApplyTimeout},
			{"POST", "/apply", `{"orgs":[{"name":"acme"}]}`, admin.CodeApplyTimeout, context.Background(), time.Nanosecond},
			{"POST", "/orgs", `{"name":"acme"}`, admin.CodeCanceled, canceled, admin.ApplyTimeout},
		} {
			e.svc.SetApplyTimeout(c.timeout)
			status, out := serve(c.method, c.path, c.body, c.ctx)
			if status != 503 || !strings.Contains(out, `"code":"`+c.code+`"`) {
				t.Errorf("%s %s: %d %s, want 503 %s", c.method, c.path, status, out, c.code)
			}
		}
		e.svc.SetApplyTimeout(admin.ApplyTimeout)
		logs := e.logs.String()
		if strings.Contains(logs, `"level":"ERROR"`) || strings.Count(logs, `"level":"WARN"`) != 3 {
			t.Errorf("logs:\n%s", logs)
		}
		if after := e.state(); after != before {
			t.Fatal("a stopped request wrote")
		}
	})
}

// blockingBody is a request body that says when it is first read, then
// blocks until released, and then ends the body it holds.
type blockingBody struct {
	reading chan struct{} // closed at the first Read
	release chan struct{}
	once    sync.Once
	rest    io.Reader
}

func (b *blockingBody) Read(p []byte) (int, error) {
	b.once.Do(func() { close(b.reading) })
	<-b.release
	return b.rest.Read(p)
}

func (b *blockingBody) Close() error { return nil }

// recordingBody counts its reads.
type recordingBody struct{ reads atomic.Int32 }

func (b *recordingBody) Read([]byte) (int, error) { b.reads.Add(1); return 0, io.EOF }
func (b *recordingBody) Close() error             { return nil }

// A second /apply while one is reading its body is refused with
// apply_in_progress before its own body is read, so that concurrent
// applies cannot each hold a decoded configuration; the first completes.
func TestApplyInProgressBeforeBody(t *testing.T) {
	e := newEnv(t, "sqlite", nil)
	h := adminapi.NewHandler(e.svc)
	post := func(body io.ReadCloser) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", adminapi.Prefix+"/apply", body)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	first := &blockingBody{reading: make(chan struct{}), release: make(chan struct{}),
		rest: strings.NewReader(`{"orgs":[{"name":"acme"}]}`)}
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() { done <- post(first) }()
	select {
	case <-first.reading:
	case <-time.After(30 * time.Second):
		t.Fatal("the first apply never read its body")
	}
	second := &recordingBody{}
	rec := post(second)
	if rec.Code != 409 || !strings.Contains(rec.Body.String(), `"`+admin.CodeApplyInProgress+`"`) {
		t.Errorf("second apply: %d %s", rec.Code, rec.Body)
	}
	if n := second.reads.Load(); n != 0 {
		t.Errorf("the refused apply's body was read %d times", n)
	}
	close(first.release)
	if rec := <-done; rec.Code != 200 {
		t.Fatalf("first apply: %d %s", rec.Code, rec.Body)
	}
	if rec := post(io.NopCloser(strings.NewReader(`{"orgs":[{"name":"acme"}]}`))); rec.Code != 200 {
		t.Fatalf("apply after the first: %d %s", rec.Code, rec.Body)
	}
}

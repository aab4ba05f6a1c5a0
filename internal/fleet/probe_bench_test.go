package fleet

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/store"
)

// BenchmarkProbeClosing is one probe (/health, then /v1/models closing the
// connection) as a controller whose connections close between sweeps
// sends it.
func BenchmarkProbeClosing(b *testing.B) {
	box := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			w.Write([]byte(`{"data":[{"id":"Qwen/Qwen3-8B","max_model_len":8192}]}`))
		}
	}))
	defer box.Close()
	u, _ := url.Parse(box.URL)
	port, _ := strconv.Atoi(u.Port())
	var d net.Dialer
	c := NewController(nil, ControllerConfig{Interval: 10 * time.Second, Dial: d.DialContext},
		slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	h := &store.Host{IP: "127.0.0.1", Port: port, Recipe: fleetapi.Recipe{VLLM: vllm()}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res := c.probe(ctx, h); res.err != nil {
			b.Fatal(res.err)
		}
	}
}

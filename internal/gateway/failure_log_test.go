package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/testkit"
)

type syncBuffer = testkit.Buffer

// logTo makes the harness's gateway log at info and above into a buffer.
func (h *harness) logTo() *syncBuffer {
	buf := &syncBuffer{}
	h.gw.log = slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return buf
}

// TestClassifyErr: every transport or read error is a timeout (ours or the
// network's), the client's leaving, or a connect error; there is no other
// outcome, so nothing past the timeout checks needs telling apart.
func TestClassifyErr(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	timer := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		return ctx
	}
	for _, c := range []struct {
		name          string
		err           error
		attempt, cctx context.Context
		want          Class
	}{
		{"refused", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, live, live, ClassConnect},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), live, live, ClassConnect},
		{"dns", &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}, live, live, ClassConnect},
		{"closed early", errors.New("unexpected EOF"), live, live, ClassConnect},
		{"network timeout", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, live, live, ClassTimeout},
		{"first byte", context.Canceled, timer(errFirstByteTimeout), live, ClassTimeout},
		{"idle", context.Canceled, timer(errIdleTimeout), live, ClassIdleTimeout},
		{"client left", context.Canceled, gone, gone, ClassClientCancelled},
	} {
		if got := classifyErr(c.err, c.attempt, c.cctx); got != c.want {
			t.Errorf("%s: classifyErr = %q, want %q", c.name, got, c.want)
		}
	}
	// The cause travels with the error: the timer's reason and the
	// transport's error can both be found in it.
	err := attemptErr(context.Canceled, timer(errIdleTimeout))
	if !errors.Is(err, errIdleTimeout) || !errors.Is(err, context.Canceled) {
		t.Errorf("attemptErr = %v, lost a cause", err)
	}
	if err := attemptErr(syscall.ECONNRESET, live); err != syscall.ECONNRESET {
		t.Errorf("attemptErr without a timer = %v", err)
	}
}

// TestFailedAttemptsAreLogged: every failed attempt is logged at warn with
// the request id, provider, class, status and its cause, as
// httputil.ReverseProxy logs transport errors; no credential, virtual key
// nor upstream body is ever in the log.
func TestFailedAttemptsAreLogged(t *testing.T) {
	h := newHarness(t, Config{})
	logs := h.logTo()
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.WriteHeader(500)
		_, _ = w.Write([]byte(`{"error":"UPSTREAM-BODY-TEXT at 10.9.8.7"}`))
	})
	dead := h.provider("dead", deadURL(t), store.ProviderSettings{}, "sk-DEADKEY-FAKE")
	broken := h.provider("broken", up.base(), store.ProviderSettings{}, "sk-BROKENKEY-FAKE")
	h.route("m", "", store.Target{ProviderID: dead, Weight: 1}, store.Target{ProviderID: broken, Weight: 1})

	resp := h.post("/v1/chat/completions", `{"model":"m","messages":[]}`, "X-Request-Id", "trace-log-1")
	body := readAll(t, resp)
	if resp.StatusCode != 502 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	out := logs.String()
	t.Logf("log:\n%s", out)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(l, "upstream attempt failed") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("%d attempt lines, want 2", len(lines))
	}
	for _, want := range [][]string{
		{"level=WARN", "request_id=trace-log-1", "org=default", "provider=dead", "class=connect_error", "connection refused"},
		{"level=WARN", "request_id=trace-log-1", "org=default", "provider=broken", "class=server_error", "status=500", "500 Internal Server Error"},
	} {
		found := false
		for _, l := range lines {
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(l, w)
			}
			found = found || ok
		}
		if !found {
			t.Errorf("no line with %q", want)
		}
	}
	for _, secret := range []string{"sk-DEADKEY-FAKE", "sk-BROKENKEY-FAKE", h.key, "UPSTREAM-BODY-TEXT"} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
}

// TestUnauthenticatedRequestsAreCounted: a request without a valid virtual
// key is a request too: rolter_requests_total counts it with status 401 and
// no org, project, route or provider (nothing the client sent becomes a
// label).
func TestUnauthenticatedRequestsAreCounted(t *testing.T) {
	h := newHarness(t, Config{})
	for _, c := range []struct{ path, body, header, value string }{
		{"/v1/chat/completions", `{"model":"m","messages":[]}`, "Authorization", "Bearer rk-not-a-key"},
		{"/v1/messages", `{"model":"m"}`, "X-Api-Key", "guess-" + strings.Repeat("x", 300)},
	} {
		req, _ := http.NewRequest("POST", h.srv.URL+c.path, strings.NewReader(c.body))
		req.Header.Set(c.header, c.value)
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		readAll(t, resp)
		if resp.StatusCode != 401 {
			t.Fatalf("%s: status %d", c.path, resp.StatusCode)
		}
	}
	labels := map[string]string{"org": "", "project": "", "route": "", "provider": "", "status": "401", "class": ""}
	if n := counterValue(t, h.reg, "rolter_requests_total", labels); n != 2 {
		t.Fatalf("unauthenticated requests counted %v, want 2", n)
	}
	mfs, err := h.reg.Gather()
	must(t, err)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if strings.Contains(lp.GetValue(), "guess-") || strings.Contains(lp.GetValue(), "rk-not") {
					t.Fatalf("a client string became a label: %s", lp.GetValue())
				}
			}
		}
	}
}

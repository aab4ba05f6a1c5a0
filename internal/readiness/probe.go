package readiness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// anthropicVersion is the API version sent with x-api-key.
const anthropicVersion = "2023-06-01"

// errTooLarge is returned by get for a body over Config.MaxBody.
var errTooLarge = errors.New("body too large")

// selfHosted reports whether kind is an inference server probed on its
// /health (vllm, sglang, llamacpp), not a hosted API.
func selfHosted(kind string) bool {
	return kind == store.KindVLLM || kind == store.KindSGLang || kind == store.KindLlamaCpp
}

// observe probes p once. It only ever sends GETs. The observation's
// status is that of the last request's answer.
func (c *Cache) observe(ctx context.Context, p Provider) (o observation) {
	var status int
	defer func() { o.status = status }()
	get := func(u string, closeConn bool) ([]byte, error) {
		body, code, err := c.get(ctx, p, u, closeConn)
		status = code
		return body, err
	}
	base := p.BaseURL
	root := strings.TrimSuffix(base, "/v1")
	redact := func(s string) string { return redactSecret(s, p.Credential) }

	// A self-hosted server's probe closes its connection with its last
	// request when connections are not kept between probes (closeConns);
	// a hosted API keeps it (a TLS handshake per probe costs more than
	// the one connection). A probe that fails earlier leaves its
	// connection to the transport's idle timeout.
	closeLast := c.closeConns && p.Kind != store.KindLlamaCpp
	var models []byte
	switch p.Kind {
	case store.KindVLLM, store.KindSGLang, store.KindLlamaCpp:
		if _, err := get(root+"/health", c.closeConns && !p.Upstream); err != nil {
			o := healthFailed(redact("health probe failed: GET /health: " + err.Error()))
			o.refused = Refused(err)
			return o
		}
		if !p.Upstream {
			return observation{}
		}
		body, err := get(base+"/models", closeLast)
		if err != nil {
			return metadataError("GET /models", err, redact)
		}
		models = body
	default:
		// A hosted API has no health endpoint; listing models is the
		// cheapest authenticated GET it serves.
		body, err := get(base+"/models", false)
		if err != nil {
			o := healthFailed(redact("health probe failed: GET /models: " + err.Error()))
			o.refused = Refused(err)
			return o
		}
		if !p.Upstream {
			return observation{}
		}
		models = body
	}

	if p.Kind != store.KindLlamaCpp {
		return fromModels(models, redact)
	}
	// llama.cpp: /props must agree with the card, and its context wins.
	card, err := parseModels(models)
	if err != nil {
		return unusableMetadata(redact(err.Error()))
	}
	facts := Facts{ModelID: card.id, Context: card.context}
	body, err := get(root+"/props", c.closeConns)
	if err != nil {
		return metadataError("GET /props", err, redact)
	}
	pr, err := parseProps(body)
	if err != nil {
		return unusableMetadata(redact(err.Error()))
	}
	if pr.alias != "" && pr.alias != card.id {
		return unusableMetadata(redact(fmt.Sprintf("/props model_alias %q disagrees with /v1/models id %q", pr.alias, card.id)))
	}
	if pr.context > 0 {
		// The runtime per-slot context, which llama.cpp enforces;
		// meta.n_ctx_train on the card is only what the model was
		// trained for.
		facts.Context = pr.context
	}
	facts.Slots, facts.Modalities, facts.Build = pr.slots, pr.modalities, pr.build
	facts.Quantization = quantization(pr.ftype, card.ftype, pr.modelPath)
	if facts.Context == 0 {
		return unusableMetadata(redact(fmt.Sprintf(
			"GET /models: model %q reports no context length (looked for %s)", card.id, contextKeysDoc)))
	}
	return observation{facts: facts}
}

// fromModels is the observation of an upstream provider (not llama.cpp,
// whose /props also counts) that listed models.
func fromModels(models []byte, redact func(string) string) observation {
	card, err := parseModels(models)
	if err != nil {
		return unusableMetadata(redact(err.Error()))
	}
	if card.context == 0 {
		return unusableMetadata(redact(fmt.Sprintf(
			"GET /models: model %q reports no context length (looked for %s)", card.id, contextKeysDoc)))
	}
	return observation{facts: Facts{ModelID: card.id, Context: card.context, Quantization: ftypeShort(card.ftype)}}
}

// Refused reports whether err is a connection refused, or reset while
// dialling: nothing reached the server, so it certainly does not serve at
// that address now (unlike a timeout, which a slow server also causes).
func Refused(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" && errors.Is(err, syscall.ECONNRESET)
}

// metadataError classifies a failed metadata request: a body over the cap
// is unusable metadata, anything else (unreachable, non-2xx) a failed probe.
func metadataError(what string, err error, redact func(string) string) observation {
	msg := redact(what + ": " + err.Error())
	if errors.Is(err, errTooLarge) {
		return unusableMetadata(msg)
	}
	return metadataFailed("metadata probe failed: " + msg)
}

// get GETs u with p's credential and returns the body of a 2xx answer, read
// through the MaxBody cap, and the answer's HTTP status (0 when none came:
// refused, timed out); closeConn closes the connection after it (a
// probe's last request). Its errors name neither the host nor the
// credential.
func (c *Cache) get(ctx context.Context, p Provider, u string, closeConn bool) (body []byte, status int, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Accept", "application/json")
	req.Close = closeConn
	if !p.Credential.IsZero() {
		if p.Kind == store.KindAnthropic {
			req.Header.Set("x-api-key", p.Credential.Reveal())
			req.Header.Set("anthropic-version", anthropicVersion)
		} else {
			req.Header.Set("Authorization", "Bearer "+p.Credential.Reveal())
		}
	}
	var resp *http.Response
	if c.probes != nil {
		resp, err = c.probes.RoundTrip(req)
	} else {
		resp, err = c.client.Do(req)
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			return nil, 0, fmt.Errorf("timed out after %s", c.cfg.Timeout)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // drop "Get \"http://host/...\":": the path is in the caller's message
		}
		return nil, 0, err
	}
	defer resp.Body.Close()
	status = resp.StatusCode
	body, err = io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxBody+1))
	if err != nil {
		return nil, status, fmt.Errorf("reading body: %w", err)
	}
	if int64(len(body)) > c.cfg.MaxBody {
		return nil, status, fmt.Errorf("%w: over %d bytes", errTooLarge, c.cfg.MaxBody)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := "returned " + strconv.Itoa(resp.StatusCode)
		if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
			return nil, status, errors.New(msg + " (a redirect: probes do not follow redirects)")
		}
		if detail := errorDetail(body); detail != "" {
			msg += ": " + detail
		}
		return nil, status, errors.New(msg)
	}
	return body, status, nil
}

// errorDetail extracts the message of an error body in the shapes the
// engines send: {"error":{"message":...}} (OpenAI, llama.cpp, Anthropic),
// {"message":...} (vLLM and SGLang ErrorResponse), {"detail":...} (FastAPI).
func errorDetail(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
		Message string `json:"message"`
		Detail  any    `json:"detail"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	msg := e.Error.Message
	if msg == "" {
		msg = e.Message
	}
	if s, ok := e.Detail.(string); ok && msg == "" {
		msg = s
	}
	return truncate(msg, 200)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// redactSecret removes the credential from s: an upstream's error message
// may echo the key it refused, and reasons are logged and shown to admins.
func redactSecret(s string, cred secret.Secret) string {
	if k := cred.Reveal(); k != "" {
		s = strings.ReplaceAll(s, k, secret.Redacted)
	}
	return s
}

package agent

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/testkit"
)

// slowFiles serves one file in chunks, one chunk per token on gate, so a
// test decides how far a download gets. It supports Range with a strong
// ETag, as http.ServeContent does.
type slowFiles struct {
	data  []byte
	chunk int
	gate  chan struct{}

	mu     sync.Mutex
	ranges []string // the Range header of each request
}

func (s *slowFiles) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.ranges = append(s.ranges, r.Header.Get("Range"))
	s.mu.Unlock()
	w.Header().Set("Content-Length", strconv.Itoa(len(s.data)))
	w.Header().Set("ETag", `"v1"`)
	w.WriteHeader(http.StatusOK)
	for off := 0; off < len(s.data); off += s.chunk {
		select {
		case <-s.gate:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write(s.data[off:min(off+s.chunk, len(s.data))])
		w.(http.Flusher).Flush()
	}
}

// Section 2 of issue 18: during a long download the agent keeps fetching
// and reporting, with the bytes done and the total, and keeps reconciling
// the box's other assignments; once the download completes, the
// assignment is launched on the weights.
func TestAgentReportsWhileDownloading(t *testing.T) {
	e := newEnv(t)
	files := &slowFiles{data: bytes.Repeat([]byte("w"), 64<<10), chunk: 16 << 10, gate: make(chan struct{})}
	srv := httptest.NewServer(files)
	defer srv.Close()
	defer close(files.gate) // lets a handler still running finish first
	fs := newFleetServer(t)
	e.reportEvery = 300 * time.Millisecond // a stalled download's report is unchanged: heartbeats

	dlPort, otherPort, laterPort := freePort(t), freePort(t), freePort(t)
	dl := hfAssignment(21, dlPort)
	dl.Recipe.VLLM.Model = "slow-gguf"
	dl.Recipe.VLLM.Source = fleetapi.Source{Kind: fleetapi.SourceURL, URL: srv.URL + "/slow/model.gguf"}
	fs.set(dl, hfAssignment(22, otherPort))
	e.start(e.config(fs.url()))
	e.waitRun(otherPort)

	files.gate <- struct{}{} // one chunk of four
	testkit.Eventually(t, "a report with the first chunk's progress", func() bool {
		ap, _, ok := fs.applied(21)
		return ok && ap.Download != nil && ap.Download.State == fleetapi.DownloadFetching &&
			ap.Download.BytesDone == 16<<10 && ap.Download.BytesTotal == 64<<10 &&
			ap.Revision == "" && strings.Contains(ap.Error, "downloading weights: 16.0 KiB of 64.0 KiB (25%)")
	})
	// The loop goes on: more fetches and reports, all with the progress.
	fetches, reports := fs.counts()
	testkit.Eventually(t, "three more fetches and reports during the download", func() bool {
		f, r := fs.counts()
		return f >= fetches+3 && r >= reports+3
	})
	if ap, _, _ := fs.applied(21); ap.Download == nil || ap.Download.BytesDone != 16<<10 {
		t.Fatalf("a report during the download lost its progress: %+v", ap)
	}
	// A host assigned during the download is launched meanwhile.
	later := hfAssignment(23, laterPort)
	fs.set(dl, hfAssignment(22, otherPort), later)
	e.waitRun(laterPort)
	if _, ok := e.record(dlPort); ok {
		t.Fatal("launched on half the weights")
	}
	if entries, _ := os.ReadDir(e.models); len(entries) != 2 { // .url-X.partial and its .json
		t.Errorf("models directory during the download: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(e.models, urlDirName(dl.Recipe.VLLM.Source.URL))); err == nil {
		t.Fatal("the target directory exists before the download completed")
	}

	for range 3 {
		files.gate <- struct{}{}
	}
	rec := e.waitRun(dlPort)
	want := filepath.Join(e.models, urlDirName(dl.Recipe.VLLM.Source.URL), "model.gguf")
	if rec.Argv[1] != want {
		t.Errorf("launched on %q, want %q", rec.Argv[1], want)
	}
	if b, err := os.ReadFile(want); err != nil || !bytes.Equal(b, files.data) {
		t.Errorf("weights on disk: %d bytes, %v", len(b), err)
	}
	testkit.Eventually(t, "the download's host reported running, without progress", func() bool {
		ap, _, _ := fs.applied(21)
		return ap.Revision == fleetapi.Revision(dl) && ap.Download == nil && ap.Error == ""
	})
	if entries, _ := os.ReadDir(e.models); len(entries) != 1 {
		t.Errorf("left beside the weights: %v", entries)
	}
}

// resumable serves a file with a strong ETag and Range support
// (http.ServeContent); while cut is set, a whole-file answer stops after
// cut bytes, as a dropped connection does.
type resumable struct {
	mu     sync.Mutex
	data   []byte
	etag   string
	cut    int
	ranges []string
}

func (s *resumable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	data, etag, cut := s.data, s.etag, s.cut
	s.ranges = append(s.ranges, r.Header.Get("Range"))
	s.mu.Unlock()
	w.Header().Set("ETag", etag)
	if cut > 0 && r.Header.Get("Range") == "" {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		_, _ = w.Write(data[:cut])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection drops mid-body
	}
	http.ServeContent(w, r, "model.bin", time.Time{}, bytes.NewReader(data))
}

func (s *resumable) set(f func(*resumable)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *resumable) lastRange() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ranges[len(s.ranges)-1]
}

// An interrupted download never leaves a file that looks complete; the
// next attempt resumes the same content, and starts over when the file
// on the server changed.
func TestDownloadResumesOrRestarts(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	s := &resumable{data: data, etag: `"v1"`, cut: 10000}
	srv := httptest.NewServer(s)
	defer srv.Close()
	models := t.TempDir()
	rawURL := srv.URL + "/m/model.bin"
	dir := filepath.Join(models, urlDirName(rawURL))
	var p progress

	err := downloadURL(context.Background(), srv.Client(), rawURL, dir, 0, &p)
	if err == nil || !strings.Contains(err.Error(), "the next attempt resumes") {
		t.Fatalf("interrupted download: %v", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("an interrupted download left the target directory")
	}
	if w, _ := locateWeights(&fleetapi.VLLM{Model: "m", Source: fleetapi.Source{Kind: "url", URL: rawURL}}, models, srv.Client()); w.Present {
		t.Fatal("half a download is taken for weights")
	}
	if fi, err := os.Stat(filepath.Join(models, "."+filepath.Base(dir)+".partial", "model.bin")); err != nil || fi.Size() != 10000 {
		t.Fatalf("partial: %v, %v", fi, err)
	}

	// Resumed: a Range request from the bytes kept, the rest appended.
	s.set(func(s *resumable) { s.cut = 0 })
	p = progress{}
	if err := downloadURL(context.Background(), srv.Client(), rawURL, dir, 0, &p); err != nil {
		t.Fatal(err)
	}
	if got := s.lastRange(); got != "bytes=10000-" {
		t.Errorf("second attempt sent Range %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "model.bin")); !bytes.Equal(b, data) {
		t.Fatalf("resumed file differs (%d bytes)", len(b))
	}
	if p.done.Load() != int64(len(data)) || p.total.Load() != int64(len(data)) {
		t.Errorf("progress %d of %d", p.done.Load(), p.total.Load())
	}
	if entries, _ := os.ReadDir(models); len(entries) != 1 {
		t.Errorf("left beside the weights: %v", entries)
	}

	// The file changed on the server between the attempts: If-Range makes
	// the server send it whole, and the download starts over.
	rawURL2 := srv.URL + "/m2/model.bin"
	dir2 := filepath.Join(models, urlDirName(rawURL2))
	s.set(func(s *resumable) { s.cut = 20000 })
	if err := downloadURL(context.Background(), srv.Client(), rawURL2, dir2, 0, &progress{}); err == nil {
		t.Fatal("the cut download succeeded")
	}
	data2 := bytes.Repeat([]byte("ZYXWVUTSRQPONMLK"), 3000)
	s.set(func(s *resumable) { s.cut, s.data, s.etag = 0, data2, `"v2"` })
	if err := downloadURL(context.Background(), srv.Client(), rawURL2, dir2, 0, &progress{}); err != nil {
		t.Fatal(err)
	}
	if got := s.lastRange(); got != "bytes=20000-" {
		t.Errorf("the restart did not try to resume first: Range %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dir2, "model.bin")); !bytes.Equal(b, data2) {
		t.Fatalf("after a change on the server the file is %d bytes, not the new %d", len(b), len(data2))
	}
}

// A body shorter than its Content-Length, or a cancelled download, is
// never renamed into place.
func TestDownloadIncompleteNeverLooksComplete(t *testing.T) {
	gate := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		_, _ = w.Write(make([]byte, 100))
		w.(http.Flusher).Flush()
		select {
		case <-gate:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(gate)
	models := t.TempDir()
	rawURL := srv.URL + "/model.gguf"
	dir := filepath.Join(models, urlDirName(rawURL))
	ctx, cancel := context.WithCancel(context.Background())
	var p progress
	errc := make(chan error, 1)
	go func() { errc <- downloadURL(ctx, srv.Client(), rawURL, dir, 0, &p) }()
	testkit.Eventually(t, "100 bytes fetched", func() bool { return p.done.Load() == 100 })
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a cancelled download succeeded")
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("a cancelled download left the target directory")
	}
}

// A registry source whose weights are not on the box is refused at once,
// with a report that says where they were looked for and why the agent
// does not fetch them; the rest of the box keeps running.
func TestAgentRegistryWithoutWeights(t *testing.T) {
	e := newEnv(t)
	fs := newFleetServer(t)
	e.reportEvery = 300 * time.Millisecond // the refusal's report is unchanged: heartbeats
	regPort, okPort := freePort(t), freePort(t)
	reg := hfAssignment(31, regPort)
	reg.Recipe.VLLM.Model = "llama"
	reg.Recipe.VLLM.Source = fleetapi.Source{Kind: fleetapi.SourceRegistry, Ref: "registry.internal/models/llama:v3"}
	fs.set(reg, hfAssignment(32, okPort))
	e.start(e.config(fs.url()))
	e.waitRun(okPort)
	want := "weights for registry ref registry.internal/models/llama:v3 not found at " +
		filepath.Join(e.models, "registry.internal_models_llama_v3") +
		": registry pulls are done by the box's image tooling, not by the agent"
	testkit.Eventually(t, "the refusal in a report", func() bool {
		ap, _, ok := fs.applied(31)
		return ok && ap.Revision == "" && ap.Error == want && ap.Download == nil
	})
	_, reports := fs.counts()
	testkit.Eventually(t, "reports go on", func() bool {
		_, n := fs.counts()
		return n >= reports+2
	})
	if _, ok := e.record(regPort); ok {
		t.Error("launched without weights")
	}
	if strings.Count(e.logs.String(), want) != 1 {
		t.Error("the refusal is not logged exactly once")
	}
}

// A gateway older than applied[].download refuses the field: the agent
// sends the report again without it, and the error still tells.
func TestAgentReportsProgressToAnOldGateway(t *testing.T) {
	e := newEnv(t)
	files := &slowFiles{data: bytes.Repeat([]byte("w"), 32<<10), chunk: 16 << 10, gate: make(chan struct{})}
	srv := httptest.NewServer(files)
	defer srv.Close()
	defer close(files.gate)
	fs := newFleetServer(t)
	fs.mu.Lock()
	fs.old = true
	fs.mu.Unlock()
	dl := hfAssignment(41, freePort(t))
	dl.Recipe.VLLM.Source = fleetapi.Source{Kind: fleetapi.SourceURL, URL: srv.URL + "/m.gguf"}
	fs.set(dl)
	e.start(e.config(fs.url()))
	files.gate <- struct{}{}
	testkit.Eventually(t, "an accepted report saying downloading", func() bool {
		ap, _, ok := fs.applied(41)
		return ok && ap.Download == nil && strings.Contains(ap.Error, "downloading weights: 16.0 KiB of 32.0 KiB")
	})
	fs.mu.Lock()
	refused := fs.refused
	fs.mu.Unlock()
	if refused == 0 {
		t.Error("the agent never sent the download field")
	}
	if strings.Contains(e.logs.String(), "report failed") {
		t.Error("the fallback is logged as a failed report")
	}
}

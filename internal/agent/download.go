package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
)

// A url download runs beside the agent's fetch/report loop, as a job: the
// loop starts it, reports its progress on every cycle, and takes its
// result on the first cycle after it ends (the job wakes the loop). One
// job per target directory, so two hosts of one URL share it.
//
// On disk, for the target <models>/url-X:
//
//	.url-X.partial/<name>   the bytes so far (kept across failures and
//	                        agent restarts, and resumed)
//	.url-X.partial.json     what the server said of them (validator, size)
//	.url-X.unpack-*         an archive being unpacked
//	url-X/                  appears only complete, by rename
//
// So nothing at url-X is ever a half download.

// progress counts a download's bytes; the job writes, the report reads.
type progress struct {
	unpacking atomic.Bool
	done      atomic.Int64
	total     atomic.Int64 // 0 while unknown
}

func (p *progress) wire() *fleetapi.Download {
	d := &fleetapi.Download{State: fleetapi.DownloadFetching, BytesDone: p.done.Load(), BytesTotal: p.total.Load()}
	if p.unpacking.Load() {
		d.State, d.BytesTotal = fleetapi.DownloadUnpacking, 0
	}
	return d
}

// String is the progress for a report's error and a log line.
func (p *progress) String() string {
	if p.unpacking.Load() {
		return "unpacking weights: " + humanBytes(p.done.Load()) + " written"
	}
	done, total := p.done.Load(), p.total.Load()
	if total > 0 {
		return fmt.Sprintf("downloading weights: %s of %s (%d%%)", humanBytes(done), humanBytes(total), done*100/total)
	}
	return "downloading weights: " + humanBytes(done)
}

// downloadJob is one download in progress or just ended.
type downloadJob struct {
	dir    string
	cancel context.CancelFunc
	done   chan struct{} // closed when the job has ended; then path, err hold
	prog   progress
	path   string
	err    error
}

func (j *downloadJob) finished() bool {
	select {
	case <-j.done:
		return true
	default:
	}
	return false
}

// errDownloading is what prepare returns while an assignment's weights
// are being fetched: not a refusal, the assignment waits.
type errDownloading struct{ job *downloadJob }

func (e *errDownloading) Error() string { return e.job.prog.String() }

// awaitDownload starts w's download, or looks at the one under way: it
// returns the path to load once the job has ended well, its error once it
// has failed, and *errDownloading while it runs. Called from Run's
// goroutine only.
func (a *Agent) awaitDownload(ctx context.Context, as fleetapi.Assignment, w weights) (string, error) {
	j := a.downloads[w.downloadDir]
	if j == nil {
		j = a.startDownload(ctx, as, w)
	}
	a.waiting[as.HostID] = j
	if !j.finished() {
		return "", &errDownloading{job: j}
	}
	return j.path, j.err
}

func (a *Agent) startDownload(ctx context.Context, as fleetapi.Assignment, w weights) *downloadJob {
	dctx, cancel := context.WithTimeout(ctx, downloadTimeout)
	j := &downloadJob{dir: w.downloadDir, cancel: cancel, done: make(chan struct{})}
	a.downloads[w.downloadDir] = j
	lock := a.dirLocks[w.downloadDir]
	if lock == nil {
		lock = &sync.Mutex{}
		a.dirLocks[w.downloadDir] = lock
	}
	u, _ := url.Parse(as.Recipe.VLLM.Source.URL)
	log := a.log.With("host_id", as.HostID, "url", redactURL(u), "dir", w.downloadDir)
	log.Info("downloading weights beside the fetch/report loop")
	a.jobs.Go(func() {
		defer cancel()
		// A job cancelled a moment ago may still hold the directory.
		lock.Lock()
		defer lock.Unlock()
		start := time.Now()
		j.path, j.err = w.download(dctx, &j.prog)
		if j.err != nil {
			log.Warn("download failed; retried on a later cycle", "error", j.err, "bytes", j.prog.done.Load())
		} else {
			log.Info("weights downloaded", "path", j.path, "bytes", j.prog.done.Load(), "took", time.Since(start).Round(time.Millisecond))
		}
		close(j.done)
		select { // wake the loop to launch (or report) without waiting an interval
		case a.wake <- struct{}{}:
		default:
		}
	})
	return j
}

// settleDownloads ends a reconcile pass: an ended job is forgotten (its
// result was taken this pass, or it is retried from scratch on the next),
// and a running job no assignment waits for any more is cancelled.
func (a *Agent) settleDownloads() {
	wanted := map[*downloadJob]bool{}
	for _, j := range a.waiting {
		wanted[j] = true
	}
	for dir, j := range a.downloads {
		if j.finished() {
			delete(a.downloads, dir)
			continue
		}
		if !wanted[j] {
			j.cancel()
			delete(a.downloads, dir)
		}
	}
}

// stopDownloads cancels every job and waits for them (shutdown).
func (a *Agent) stopDownloads() {
	for _, j := range a.downloads {
		j.cancel()
	}
	a.jobs.Wait()
}

// partMeta is what the server said of a partial download, kept beside it
// so that a later attempt resumes only the same content.
type partMeta struct {
	URL string `json:"url"`
	// Validator is the strong ETag, else Last-Modified, sent as If-Range:
	// a server whose file changed answers the whole new file.
	Validator string `json:"validator"`
	Total     int64  `json:"total"`
}

// downloadURL fetches rawURL into dir (which must not exist) and, when its
// name says it is an archive (.tar, .tar.gz, .tgz, .zip), unpacks it
// there, writing at most limit bytes (0: the free disk). A failed download
// leaves its bytes in the partial directory, and the next attempt resumes
// them when the server allows (a Range request guarded by If-Range);
// otherwise it starts over. dir appears, by rename, only complete.
func downloadURL(ctx context.Context, client *http.Client, rawURL, dir string, limit int64, p *progress) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	name := path.Base(u.Path)
	if name == "" || name == "." || name == "/" || !filepath.IsLocal(name) {
		name = "model"
	}
	parent, base := filepath.Dir(dir), filepath.Base(dir)
	partDir := filepath.Join(parent, "."+base+".partial")
	metaPath := partDir + ".json"
	if err := fetchFile(ctx, client, u, partDir, name, metaPath, p); err != nil {
		return err
	}

	kind := archiveKindOf(name)
	if kind == "" {
		if err := os.Chmod(partDir, 0o755); err != nil { //nolint:gosec // G302: a weights directory vLLM must read
			return fmt.Errorf("download: %w", err)
		}
		if err := os.Rename(partDir, dir); err != nil && !isDir(dir) {
			return fmt.Errorf("download: %w", err)
		}
		_ = os.Remove(metaPath)
		return nil
	}

	// Unpack beside the target. What a crash left of an earlier attempt
	// goes first.
	if old, _ := filepath.Glob(filepath.Join(parent, "."+base+".unpack-*")); len(old) > 0 {
		for _, o := range old {
			_ = os.RemoveAll(o)
		}
	}
	tmp, err := os.MkdirTemp(parent, "."+base+".unpack-")
	if err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	if limit <= 0 {
		free, err := diskFree(parent)
		if err != nil {
			return fmt.Errorf("unpack: %w", err)
		}
		limit = int64(min(free, uint64(fleetapi.MaxDownloadBytes)))
	}
	p.unpacking.Store(true)
	p.done.Store(0)
	if err := unpack(ctx, filepath.Join(partDir, name), kind, tmp, limit, &p.done); err != nil {
		if errors.Is(err, errUnsafeArchive) {
			// The archive is the fault: drop it, so a fixed one at the
			// same URL is fetched whole next time.
			_ = os.RemoveAll(partDir)
			_ = os.Remove(metaPath)
		}
		return fmt.Errorf("unpack %s: %w", redactURL(u), err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil { //nolint:gosec // G302: a weights directory vLLM must read
		return fmt.Errorf("unpack: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil && !isDir(dir) {
		return fmt.Errorf("unpack: %w", err)
	}
	_ = os.RemoveAll(partDir)
	_ = os.Remove(metaPath)
	return nil
}

// fetchFile brings partDir/name to the whole of u's content, resuming
// the bytes already there when the server allows and they are of the
// same content, and checks the size the server announced.
func fetchFile(ctx context.Context, client *http.Client, u *url.URL, partDir, name, metaPath string, p *progress) error {
	part := filepath.Join(partDir, name)
	var meta partMeta
	var have int64
	if fi, err := os.Stat(part); err == nil && fi.Mode().IsRegular() {
		if b, err := os.ReadFile(metaPath); err == nil && json.Unmarshal(b, &meta) == nil && meta.URL == u.String() && meta.Validator != "" {
			have = fi.Size()
		}
	}
	if have > 0 && meta.Total > 0 && have >= meta.Total {
		have = 0 // complete but never renamed, or too long: fetch it again
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	if have > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(have, 10)+"-")
		req.Header.Set("If-Range", meta.Validator)
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message quotes the whole URL
		}
		return fmt.Errorf("download %s: %w", redactURL(u), err)
	}
	defer resp.Body.Close()

	offset, total := int64(0), resp.ContentLength
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		start, size, ok := parseContentRange(resp.Header.Get("Content-Range"))
		if !ok || start != have || (meta.Total > 0 && size != meta.Total) {
			// Not the resume asked for: start over on the next attempt.
			_ = os.RemoveAll(partDir)
			_ = os.Remove(metaPath)
			return fmt.Errorf("download %s: the server resumed at an unexpected offset; starting over", redactURL(u))
		}
		offset, total = have, size
	case resp.StatusCode == http.StatusOK:
		if total < 0 {
			total = 0
		}
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && have > 0:
		_ = os.RemoveAll(partDir)
		_ = os.Remove(metaPath)
		return fmt.Errorf("download %s: %s for the resumed range; starting over", redactURL(u), resp.Status)
	default:
		return fmt.Errorf("download %s: %s", redactURL(u), resp.Status)
	}

	if err := os.MkdirAll(partDir, 0o700); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	meta = partMeta{URL: u.String(), Validator: validator(resp.Header), Total: total}
	if b, err := json.Marshal(meta); err == nil {
		if err := writeFileAtomic(metaPath, b); err != nil {
			return fmt.Errorf("download: %w", err)
		}
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if offset > 0 {
		flags = os.O_WRONLY | os.O_APPEND
	}
	f, err := os.OpenFile(part, flags, 0o644) //nolint:gosec // G302, G304: weights vLLM must read, at a path of ours
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	p.unpacking.Store(false)
	p.total.Store(total)
	p.done.Store(offset)
	n, err := io.Copy(f, &countingReader{r: resp.Body, ctx: ctx, n: &p.done})
	if err != nil {
		_ = f.Close() // the copy error is the one to report
		return fmt.Errorf("download %s: %w after %s; the next attempt resumes", redactURL(u), err, humanBytes(offset+n))
	}
	if err := f.Sync(); err != nil {
		_ = f.Close() // the sync error is the one to report
		return fmt.Errorf("download: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	if got := offset + n; total > 0 && got != total {
		return fmt.Errorf("download %s: got %d bytes of %d; the next attempt resumes", redactURL(u), got, total)
	}
	return nil
}

// validator is what If-Range may carry for resp: a strong ETag, else
// Last-Modified; "" when neither (such a download is never resumed).
func validator(h http.Header) string {
	if et := h.Get("ETag"); et != "" && !strings.HasPrefix(et, "W/") {
		return et
	}
	return h.Get("Last-Modified")
}

// parseContentRange reads "bytes START-END/SIZE".
func parseContentRange(s string) (start, size int64, ok bool) {
	rest, found := strings.CutPrefix(s, "bytes ")
	if !found {
		return 0, 0, false
	}
	rng, sz, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, false
	}
	first, _, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, false
	}
	start, err1 := strconv.ParseInt(first, 10, 64)
	size, err2 := strconv.ParseInt(sz, 10, 64)
	if err1 != nil || err2 != nil || start < 0 || size <= start {
		return 0, 0, false
	}
	return start, size, true
}

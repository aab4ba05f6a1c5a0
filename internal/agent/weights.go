package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
)

// weights says where a recipe's weights are and how vLLM is pointed at
// them.
type weights struct {
	// Model is what vLLM is told to load: a local path, or the recipe's
	// model (or hf repo) when vLLM resolves it itself.
	Model string
	// Present is true when nothing has to be downloaded.
	Present bool
	// Env is added to vLLM's environment (HF_HUB_OFFLINE=1 for a model
	// found in the Hugging Face cache).
	Env []string
	// Revision is passed as --revision (hf sources pinned to a revision).
	Revision string
	// download fetches absent url weights into the models directory (at
	// downloadDir), counting its progress in p, and returns the path to
	// load; nil when there is nothing to download.
	download    func(ctx context.Context, p *progress) (string, error)
	downloadDir string
}

// locateWeights looks for v's weights on the box, by source kind:
//
//   - local: source.path must exist.
//   - hf: <models>/<repo> (loaded by path), else the Hugging Face cache
//     (loaded by repo id with HF_HUB_OFFLINE=1), else vLLM downloads it on
//     launch.
//   - url: <models>/url-<sha256(url)[:16]>, else downloaded there.
//   - registry: <models>/<ref with / and : as _> must exist; pulls belong
//     to the box's image tooling.
func locateWeights(v *fleetapi.VLLM, modelsDir string, client *http.Client) (weights, error) {
	src := v.Source
	switch src.Kind {
	case fleetapi.SourceLocal:
		if src.Path == "" {
			return weights{}, errors.New("local source has no path")
		}
		if !filepath.IsAbs(src.Path) {
			return weights{}, fmt.Errorf("local source path %q is not absolute", src.Path)
		}
		if _, err := os.Stat(src.Path); err != nil {
			return weights{}, fmt.Errorf("local weights not found at %s", src.Path)
		}
		return weights{Model: src.Path, Present: true}, nil

	case fleetapi.SourceHF, "":
		repo := src.Repo
		if repo == "" {
			repo = v.Model
		}
		if repo == "" || !filepath.IsLocal(repo) {
			return weights{}, fmt.Errorf("hf repo %q is not a valid repository id", repo)
		}
		if isDir(filepath.Join(modelsDir, repo)) {
			return weights{Model: filepath.Join(modelsDir, repo), Present: true}, nil
		}
		rev := src.Revision
		if r, ok := fleetapi.FlagValue(v.Args, "--revision"); ok && r != "" {
			rev = r
		}
		w := weights{Model: repo, Revision: src.Revision}
		if hfCached(hfHubDir(), repo, rev) {
			w.Present = true
			w.Env = []string{"HF_HUB_OFFLINE=1"}
		}
		return w, nil

	case fleetapi.SourceURL:
		u, err := url.Parse(src.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return weights{}, errors.New("url source needs an http(s) URL")
		}
		dir := filepath.Join(modelsDir, urlDirName(src.URL))
		if isDir(dir) {
			return weights{Model: loadPath(dir), Present: true}, nil
		}
		limit := int64(v.DiskGB * gib)
		return weights{downloadDir: dir, download: func(ctx context.Context, p *progress) (string, error) {
			if err := downloadURL(ctx, client, src.URL, dir, limit, p); err != nil {
				return "", err
			}
			return loadPath(dir), nil
		}}, nil

	case fleetapi.SourceRegistry:
		if src.Ref == "" {
			return weights{}, errors.New("registry source has no ref")
		}
		name := strings.NewReplacer("/", "_", ":", "_").Replace(src.Ref)
		dir := filepath.Join(modelsDir, name)
		if !filepath.IsLocal(name) || !isDir(dir) {
			return weights{}, fmt.Errorf("weights for registry ref %s not found at %s: registry pulls are done by the box's image tooling, not by the agent", src.Ref, dir)
		}
		return weights{Model: loadPath(dir), Present: true}, nil
	}
	return weights{}, fmt.Errorf("unknown source kind %q", src.Kind)
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// urlDirName is the models-directory entry for weights from rawURL.
func urlDirName(rawURL string) string {
	sum := sha256.Sum256([]byte(rawURL))
	return "url-" + hex.EncodeToString(sum[:])[:16]
}

// loadPath is what vLLM loads from dir: the file itself when dir holds
// exactly one regular file (a downloaded single file, e.g. a GGUF), the
// subdirectory when it holds exactly one directory (an archive whose
// files sit in a top folder), else the directory (a model unpacked there).
func loadPath(dir string) string {
	entries, err := os.ReadDir(dir)
	if err == nil && len(entries) == 1 {
		switch {
		case entries[0].Type().IsRegular():
			return filepath.Join(dir, entries[0].Name())
		case entries[0].IsDir():
			return filepath.Join(dir, entries[0].Name())
		}
	}
	return dir
}

// hfHubDir is the Hugging Face hub cache vLLM uses: $HF_HUB_CACHE, else
// $HF_HOME/hub, else ~/.cache/huggingface/hub.
func hfHubDir() string {
	if d := os.Getenv("HF_HUB_CACHE"); d != "" {
		return d
	}
	home := os.Getenv("HF_HOME")
	if home == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			h, err := os.UserHomeDir()
			if err != nil {
				return ""
			}
			base = filepath.Join(h, ".cache")
		}
		home = filepath.Join(base, "huggingface")
	}
	return filepath.Join(home, "hub")
}

// hfCached reports whether the hub cache holds repo at revision (default
// "main"): a branch or tag is resolved through refs/, a commit is a
// snapshot directory. An offline vLLM can load exactly that.
func hfCached(hubDir, repo, revision string) bool {
	if hubDir == "" {
		return false
	}
	if revision == "" {
		revision = "main"
	}
	if !filepath.IsLocal(revision) {
		return false
	}
	dir := filepath.Join(hubDir, "models--"+strings.ReplaceAll(repo, "/", "--"))
	if ref, err := os.ReadFile(filepath.Join(dir, "refs", revision)); err == nil {
		revision = strings.TrimSpace(string(ref))
		if !filepath.IsLocal(revision) {
			return false
		}
	}
	snap := filepath.Join(dir, "snapshots", revision)
	entries, err := os.ReadDir(snap)
	return err == nil && len(entries) > 0
}

// maxDownloadRedirects bounds the hops of one download.
const maxDownloadRedirects = 5

// downloadRedirect is the download client's redirect policy. A url source
// may redirect: mirrors and hubs answer with a 302 to blob storage or a
// CDN, usually with a signed URL the mirror chose. Following is safe only
// while the download carries no credential, since Go forwards
// Authorization to the same host name on any port. The agent adds none
// (no fleet key, no host key, no cookie jar), so the one credential a
// download can carry is user:password in the source URL: such a download
// follows no redirect. Nor does one from https to http, whose content an
// on-path attacker could replace with weights of their choosing.
func downloadRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxDownloadRedirects {
		return fmt.Errorf("more than %d redirects", maxDownloadRedirects)
	}
	first := via[0]
	if first.URL.User != nil || first.Header.Get("Authorization") != "" || first.Header.Get("Cookie") != "" {
		return errors.New("redirected, and a download with credentials follows no redirect")
	}
	if via[len(via)-1].URL.Scheme == "https" && req.URL.Scheme != "https" {
		return errors.New("redirected from https to plain http")
	}
	req.Header.Del("Authorization")
	req.Header.Del("Cookie")
	return nil
}

// redactURL drops credentials and the query (which may carry a signed
// token) from a URL for a message.
func redactURL(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery = ""
	c.ForceQuery = false
	return c.String()
}

// downloadTimeout bounds one download; weights are large, so it is
// generous, and the agent's context still cancels it.
const downloadTimeout = 6 * time.Hour

package agent

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rolter/rolter/internal/fleetapi"
)

// entry is one member of a test archive.
type entry struct {
	name   string
	body   string
	link   string // a symbolic link to this target
	hard   string // a hard link to this member
	dir    bool
	device bool
}

func tarOf(t *testing.T, gz bool, es ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	var zw *gzip.Writer
	w := &buf
	tw := tar.NewWriter(w)
	if gz {
		zw = gzip.NewWriter(w)
		tw = tar.NewWriter(zw)
	}
	for _, e := range es {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg}
		switch {
		case e.dir:
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		case e.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.link, 0
		case e.hard != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeLink, e.hard, 0
		case e.device:
			h.Typeflag, h.Size = tar.TypeChar, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func zipOf(t *testing.T, es ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range es {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		body := e.body
		switch {
		case e.dir:
			h.Name = strings.TrimSuffix(e.name, "/") + "/"
			h.SetMode(fs.ModeDir | 0o755)
		case e.link != "":
			h.SetMode(fs.ModeSymlink | 0o777)
			body = e.link
		default:
			h.SetMode(0o644)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Archives that would write outside their directory, through a link or
// past the size cap are refused, and nothing lands outside.
func TestUnpackRefusesEscapes(t *testing.T) {
	good := []entry{{name: "model/", dir: true}, {name: "model/config.json", body: "{}"}, {name: "./model/w.bin", body: "weights"}}
	cases := []struct {
		name string
		kind archiveKind
		data func(t *testing.T) []byte
		want string // "" for success
	}{
		{"tar.gz good", archiveTarGz, func(t *testing.T) []byte {
			return tarOf(t, true, append(good, entry{name: "model/latest", link: "w.bin"})...)
		}, ""},
		{"zip good", archiveZip, func(t *testing.T) []byte {
			return zipOf(t, append(good, entry{name: "model/latest", link: "w.bin"})...)
		}, ""},
		{"tar dot-dot", archiveTar, func(t *testing.T) []byte { return tarOf(t, false, entry{name: "../evil", body: "x"}) }, "leaves the archive's directory"},
		{"tar nested dot-dot", archiveTar, func(t *testing.T) []byte {
			return tarOf(t, false, entry{name: "model/../../evil", body: "x"})
		}, "leaves the archive's directory"},
		{"tar absolute", archiveTar, func(t *testing.T) []byte { return tarOf(t, false, entry{name: "/tmp/evil", body: "x"}) }, "absolute"},
		{"tar link out", archiveTar, func(t *testing.T) []byte { return tarOf(t, false, entry{name: "etc", link: "../../../etc"}) }, "points outside"},
		{"tar link absolute", archiveTarGz, func(t *testing.T) []byte { return tarOf(t, true, entry{name: "passwd", link: "/etc/passwd"}) }, "points outside"},
		{"tar write through a link", archiveTar, func(t *testing.T) []byte {
			return tarOf(t, false, entry{name: "here", link: "."}, entry{name: "here/../evil", body: "x"})
		}, ""}, // "here/../evil" cleans to "evil": inside, and not beneath the link
		{"tar beneath a link", archiveTar, func(t *testing.T) []byte {
			return tarOf(t, false, entry{name: "d", dir: true}, entry{name: "l", link: "d"}, entry{name: "l/x", link: "../../.."})
		}, "beneath the link"},
		{"tar file over a link", archiveTar, func(t *testing.T) []byte {
			return tarOf(t, false, entry{name: "l", link: "x"}, entry{name: "l", body: "through"})
		}, "appears twice"},
		{"tar hard link", archiveTar, func(t *testing.T) []byte {
			return tarOf(t, false, entry{name: "a", body: "x"}, entry{name: "b", hard: "/etc/passwd"})
		}, "hard link"},
		{"tar device", archiveTar, func(t *testing.T) []byte { return tarOf(t, false, entry{name: "tty", device: true}) }, "not a file"},
		{"tar over the cap", archiveTar, func(t *testing.T) []byte {
			return tarOf(t, false, entry{name: "a", body: strings.Repeat("a", 600)}, entry{name: "b", body: strings.Repeat("b", 600)})
		}, "unpacks to more than 1.0 KiB"},
		{"gzip bomb over the cap", archiveTarGz, func(t *testing.T) []byte {
			return tarOf(t, true, entry{name: "zeros", body: string(make([]byte, 1<<20))})
		}, "unpacks to more than 1.0 KiB"},
		{"zip dot-dot", archiveZip, func(t *testing.T) []byte { return zipOf(t, entry{name: "../../evil", body: "x"}) }, "leaves the archive's directory"},
		{"zip link out", archiveZip, func(t *testing.T) []byte { return zipOf(t, entry{name: "l", link: "../outside"}) }, "points outside"},
		{"not gzip", archiveTarGz, func(t *testing.T) []byte { return []byte("plain text") }, "not gzip"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			src := filepath.Join(base, "archive")
			if err := os.WriteFile(src, c.data(t), 0o600); err != nil {
				t.Fatal(err)
			}
			dest := filepath.Join(base, "a", "b", "dest")
			if err := os.MkdirAll(dest, 0o755); err != nil {
				t.Fatal(err)
			}
			limit := int64(1 << 10)
			if c.want == "" {
				limit = 1 << 20
			}
			err := unpack(context.Background(), src, c.kind, dest, limit, new(atomic.Int64))
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
			} else if err == nil || !errors.Is(err, errUnsafeArchive) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want an unsafe archive: %q", err, c.want)
			}
			// Nothing outside dest: base holds only the archive and a/.
			for _, p := range []string{filepath.Join(base, "evil"), filepath.Join(base, "a", "evil"), filepath.Join(base, "a", "b", "evil"), "/tmp/evil"} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("%s written outside the directory", p)
				}
			}
			if c.want != "" {
				return
			}
			if strings.HasSuffix(c.name, "good") {
				if b, _ := os.ReadFile(filepath.Join(dest, "model", "latest")); string(b) != "weights" {
					t.Errorf("link inside the tree: %q", b)
				}
				if got := loadPath(dest); got != filepath.Join(dest, "model") {
					t.Errorf("loadPath = %s, want the top folder", got)
				}
				fi, _ := os.Stat(filepath.Join(dest, "model", "w.bin"))
				if fi == nil || fi.Mode().Perm() != 0o644 {
					t.Errorf("w.bin mode: %v", fi)
				}
			}
		})
	}
}

// A url archive is downloaded, unpacked and renamed into place whole; a
// refused one leaves neither the target nor its bytes behind.
func TestDownloadUnpacksArchives(t *testing.T) {
	good := tarOf(t, true, entry{name: "tiny/config.json", body: "{}"}, entry{name: "tiny/model.safetensors", body: "w"})
	evil := tarOf(t, true, entry{name: "tiny/config.json", body: "{}"}, entry{name: "tiny/x", link: "../../../../etc"})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/good.tar.gz":
			_, _ = w.Write(good)
		case "/evil.tar.gz":
			_, _ = w.Write(evil)
		}
	}))
	defer srv.Close()
	models := t.TempDir()

	v := &fleetapi.VLLM{Model: "tiny", DiskGB: 0.001, Source: fleetapi.Source{Kind: "url", URL: srv.URL + "/good.tar.gz"}}
	w, err := locateWeights(v, models, srv.Client())
	if err != nil || w.download == nil {
		t.Fatal(w, err)
	}
	p, err := w.download(context.Background(), &progress{})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(models, urlDirName(v.Source.URL), "tiny"); p != want {
		t.Errorf("loads %s, want %s", p, want)
	}
	if b, _ := os.ReadFile(filepath.Join(p, "model.safetensors")); string(b) != "w" {
		t.Errorf("unpacked %q", b)
	}
	if entries, _ := os.ReadDir(models); len(entries) != 1 {
		t.Errorf("left beside the weights: %v", entries)
	}

	v.Source.URL = srv.URL + "/evil.tar.gz"
	w, _ = locateWeights(v, models, srv.Client())
	_, err = w.download(context.Background(), &progress{})
	if err == nil || !strings.Contains(err.Error(), "points outside") {
		t.Fatalf("evil archive: %v", err)
	}
	if entries, _ := os.ReadDir(models); len(entries) != 1 {
		t.Errorf("a refused archive left %v", entries)
	}
}

package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"time"
)

//go:embed static
var staticFS embed.FS

// staticFiles are the embedded stylesheet and scripts, each with a content
// hash: pages link "app.css?v=<hash>", so a new build's files are fetched
// at once and an unchanged file is cached for good.
type staticFiles struct {
	files map[string]staticFile
}

type staticFile struct {
	body  []byte
	ctype string
	hash  string // first 12 hex digits of the SHA-256 of body
}

func mustLoadStatic() *staticFiles {
	s := &staticFiles{files: map[string]staticFile{}}
	err := fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := staticFS.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ctype := mime.TypeByExtension(path.Ext(p))
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		s.files[path.Base(p)] = staticFile{body: b, ctype: ctype, hash: hex.EncodeToString(sum[:6])}
		return nil
	})
	if err != nil {
		panic("ui: embedded static files: " + err.Error())
	}
	return s
}

// url is the versioned address of a static file, for templates.
func (s *staticFiles) url(name string) string {
	f, ok := s.files[name]
	if !ok {
		panic("ui: template names a missing static file " + name)
	}
	return Prefix + "/static/" + name + "?v=" + f.hash
}

// serve answers GET /ui/static/{file}. Static files need no session: they
// hold nothing but the UI's own code.
func (s *staticFiles) serve(w http.ResponseWriter, r *http.Request) {
	f, ok := s.files[r.PathValue("file")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", f.ctype)
	w.Header().Set("ETag", `"`+f.hash+`"`)
	if r.URL.Query().Get("v") == f.hash {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		w.Header().Set("Cache-Control", "no-cache")
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
}

package agent

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
)

// archiveKind is how a downloaded file is unpacked; "" for a file that is
// not an archive (loaded as it is).
type archiveKind string

const (
	archiveTar   archiveKind = "tar"
	archiveTarGz archiveKind = "tar.gz"
	archiveZip   archiveKind = "zip"
)

// archiveKindOf tells an archive by its name, as the url source names it.
func archiveKindOf(name string) archiveKind {
	n := strings.ToLower(name)
	switch {
	case strings.HasSuffix(n, ".tar.gz"), strings.HasSuffix(n, ".tgz"):
		return archiveTarGz
	case strings.HasSuffix(n, ".tar"):
		return archiveTar
	case strings.HasSuffix(n, ".zip"):
		return archiveZip
	}
	return ""
}

// maxArchiveEntries bounds the entries of one archive: a model is a
// handful of files, and a million empty ones would exhaust inodes
// without touching the size cap.
const maxArchiveEntries = 100_000

// errUnsafeArchive marks an archive refused for its content; retrying
// the same archive cannot help.
var errUnsafeArchive = errors.New("unsafe archive")

// unpack extracts the archive at src into dest, an empty directory,
// refusing (with errUnsafeArchive) an entry that would land outside dest:
// an absolute name, a name with "..", a symbolic link whose target is
// absolute or leaves dest, an entry beneath a link of the archive, a hard
// link, a device or a FIFO. It writes at most limit bytes in all. Files
// are written 0644 and directories 0755 whatever the archive says, so
// vLLM can read them and nothing is setuid. done counts bytes written.
// On error dest holds a partial tree: the caller removes it.
func unpack(ctx context.Context, src string, kind archiveKind, dest string, limit int64, done *atomic.Int64) error {
	root, err := os.OpenRoot(dest)
	if err != nil {
		return err
	}
	defer root.Close() //nolint:errcheck // nothing written through the handle itself
	u := &unpacker{ctx: ctx, root: root, left: limit, limit: limit, done: done, links: map[string]bool{}, seen: map[string]bool{}}
	switch kind {
	case archiveTar, archiveTarGz:
		return u.tar(src, kind == archiveTarGz)
	case archiveZip:
		return u.zip(src)
	}
	return fmt.Errorf("unknown archive kind %q", kind)
}

type unpacker struct {
	ctx         context.Context //nolint:containedctx // lives for one unpack call only
	root        *os.Root
	left, limit int64
	done        *atomic.Int64
	links       map[string]bool // symbolic links created, by clean name
	seen        map[string]bool // entries written, by clean name
	entries     int
}

func (u *unpacker) tar(src string, gz bool) error {
	f, err := os.Open(src) //nolint:gosec // G304: our own download
	if err != nil {
		return err
	}
	defer f.Close() //nolint:errcheck // read only
	var r io.Reader = f
	if gz {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return fmt.Errorf("%w: not gzip: %v", errUnsafeArchive, err)
		}
		defer zr.Close() //nolint:errcheck // read only
		r = zr
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %v", errUnsafeArchive, err)
		}
		var kind fs.FileMode
		switch h.Typeflag {
		case tar.TypeReg: // the reader reports the old '\x00' spelling as TypeReg
			kind = 0
		case tar.TypeDir:
			kind = fs.ModeDir
		case tar.TypeSymlink:
			kind = fs.ModeSymlink
		case tar.TypeXGlobalHeader:
			continue // metadata only
		case tar.TypeLink:
			return fmt.Errorf("%w: %s is a hard link; hard links are refused", errUnsafeArchive, quoteName(h.Name))
		default:
			return fmt.Errorf("%w: %s is not a file, directory or symbolic link", errUnsafeArchive, quoteName(h.Name))
		}
		if err := u.entry(h.Name, kind, h.Linkname, tr); err != nil {
			return err
		}
	}
}

func (u *unpacker) zip(src string) error {
	zr, err := zip.OpenReader(src)
	if err != nil {
		return fmt.Errorf("%w: not a zip archive: %v", errUnsafeArchive, err)
	}
	defer zr.Close() //nolint:errcheck // read only
	for _, f := range zr.File {
		mode := f.Mode()
		var kind fs.FileMode
		switch {
		case mode.IsDir():
			kind = fs.ModeDir
		case mode&fs.ModeSymlink != 0:
			kind = fs.ModeSymlink
		case mode.IsRegular():
		default:
			return fmt.Errorf("%w: %s is not a file, directory or symbolic link", errUnsafeArchive, quoteName(f.Name))
		}
		if err := u.zipEntry(f, kind); err != nil {
			return err
		}
	}
	return nil
}

func (u *unpacker) zipEntry(f *zip.File, kind fs.FileMode) error {
	if kind == fs.ModeDir {
		return u.entry(f.Name, kind, "", nil)
	}
	rc, err := f.Open()
	if err != nil {
		return fmt.Errorf("%w: %s: %v", errUnsafeArchive, quoteName(f.Name), err)
	}
	defer rc.Close()
	target := ""
	if kind == fs.ModeSymlink { // a zip stores a link's target as its content
		b, err := io.ReadAll(io.LimitReader(rc, 4096))
		if err != nil {
			return fmt.Errorf("%w: %s: %v", errUnsafeArchive, quoteName(f.Name), err)
		}
		target = string(b)
	}
	return u.entry(f.Name, kind, target, rc)
}

// entry writes one entry after checking where it lands.
func (u *unpacker) entry(name string, kind fs.FileMode, target string, r io.Reader) error {
	if err := u.ctx.Err(); err != nil {
		return err
	}
	u.entries++
	if u.entries > maxArchiveEntries {
		return fmt.Errorf("%w: more than %d entries", errUnsafeArchive, maxArchiveEntries)
	}
	clean, err := u.check(name)
	if err != nil || clean == "." {
		return err // "." is the archive's own top directory
	}
	switch kind {
	case fs.ModeDir:
		return u.root.MkdirAll(clean, 0o755)
	case fs.ModeSymlink:
		// Resolved from the link's own directory, the target must stay
		// inside: vLLM follows it when it loads the weights.
		if target == "" || path.IsAbs(target) || !filepath.IsLocal(path.Join(path.Dir(clean), target)) {
			return fmt.Errorf("%w: the link %s points outside the archive", errUnsafeArchive, quoteName(name))
		}
		if err := u.root.MkdirAll(path.Dir(clean), 0o755); err != nil {
			return err
		}
		if err := u.root.Symlink(target, clean); err != nil {
			return fmt.Errorf("%w: %s: %v", errUnsafeArchive, quoteName(name), err)
		}
		u.links[clean] = true
		return nil
	}
	if err := u.root.MkdirAll(path.Dir(clean), 0o755); err != nil {
		return err
	}
	// O_EXCL: a second entry of the same name (or one over a link) is
	// refused rather than written through whatever is there.
	f, err := u.root.OpenFile(clean, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", errUnsafeArchive, quoteName(name), err)
	}
	n, err := io.Copy(f, &countingReader{r: io.LimitReader(r, u.left+1), ctx: u.ctx, n: u.done})
	u.left -= n
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if u.left < 0 {
		return fmt.Errorf("%w: it unpacks to more than %s, the cap for this model", errUnsafeArchive, humanBytes(u.limit))
	}
	if err != nil {
		return fmt.Errorf("unpack %s: %w", quoteName(name), err)
	}
	return nil
}

// check cleans an entry's name and refuses one that leaves the archive's
// directory or lies beneath one of its links.
func (u *unpacker) check(name string) (string, error) {
	if name == "" || path.IsAbs(name) || strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("%w: the entry %s has an absolute or empty name", errUnsafeArchive, quoteName(name))
	}
	clean := path.Clean(name)
	if !filepath.IsLocal(clean) && clean != "." {
		return "", fmt.Errorf("%w: the entry %s leaves the archive's directory", errUnsafeArchive, quoteName(name))
	}
	for p := path.Dir(clean); p != "."; p = path.Dir(p) {
		if u.links[p] {
			return "", fmt.Errorf("%w: the entry %s lies beneath the link %s", errUnsafeArchive, quoteName(name), quoteName(p))
		}
	}
	if u.seen[clean] && clean != "." {
		return "", fmt.Errorf("%w: the entry %s appears twice", errUnsafeArchive, quoteName(name))
	}
	u.seen[clean] = true
	return clean, nil
}

// quoteName quotes an archive's entry name for a message, cut short.
func quoteName(s string) string {
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return fmt.Sprintf("%q", s)
}

// countingReader adds what it reads to n and stops when ctx is done.
type countingReader struct {
	r   io.Reader
	ctx context.Context //nolint:containedctx // lives for one copy only
	n   *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// humanBytes prints a byte count for an operator: "1.5 GiB".
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

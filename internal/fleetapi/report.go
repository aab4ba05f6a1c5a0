package fleetapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of a report (POST /vllm/report). The gateway refuses a report
// that breaks any of them, whole, with 400; Clip brings what an agent
// measured within them before it sends.
const (
	// MaxReportBody is the largest report body in bytes.
	MaxReportBody = 1 << 20
	// MaxReportEntries bounds applied: one entry per assignment of the
	// box, and a box runs at most this many.
	MaxReportEntries = 256
	// MaxRevisionLen bounds applied[].revision ([0-9A-Za-z._-]).
	MaxRevisionLen = 64
	// MaxErrorLen bounds applied[].error, in bytes of UTF-8.
	MaxErrorLen = 1024
	// MaxNameLen bounds discovered.gpu and discovered.vllm_version.
	MaxNameLen = 256
	// MaxGPUCount bounds discovered.gpu_count (0..MaxGPUCount).
	MaxGPUCount = 64
	// MaxVRAMGB bounds discovered.vram_gb: 64 GPUs of 2 TB.
	MaxVRAMGB = 1 << 17
	// MaxDiskFreeGB bounds discovered.disk_free_gb: 16 PB.
	MaxDiskFreeGB = 1 << 24
	// MaxKVCacheBytes bounds applied[].kv_cache byte counts: 1 PiB.
	MaxKVCacheBytes = 1 << 50
	// MaxDownloadBytes bounds applied[].download.bytes_done and
	// bytes_total: 1 PiB.
	MaxDownloadBytes = 1 << 50
)

var (
	reportFields     = []string{"applied", "discovered"}
	appliedFields    = []string{"host_id", "revision", "error", "download", "fit", "gpus", "kv_cache"}
	downloadFields   = []string{"state", "bytes_done", "bytes_total"}
	kvCacheFields    = []string{"state", "initial_bytes", "bytes", "error"}
	discoveredFields = []string{"gpu", "gpu_count", "vram_gb", "disk_free_gb", "vllm_version"}
)

// ParseReport decodes and checks a report body. It refuses, naming the
// field by its JSON path ("applied[2].host_id", "discovered.gpu_count"):
// anything but one JSON object, an unknown field (names match exactly), a
// value of the wrong type, out of range or over its bound, and a second
// entry for a host. Messages never quote the values. fe is nil when the
// report is valid.
func ParseReport(body []byte) (r Report, fe map[string]string) {
	fe = map[string]string{}
	var top map[string]json.RawMessage
	if err := decodeOne(body, &top); err != nil || top == nil {
		fe[""] = "the body must be one JSON object"
		return Report{}, fe
	}
	unknown(fe, "", top, reportFields)
	if raw, ok := top["applied"]; ok && !isNull(raw) {
		var entries []json.RawMessage
		if json.Unmarshal(raw, &entries) != nil {
			fe["applied"] = "must be an array"
			return Report{}, fe
		}
		if len(entries) > MaxReportEntries {
			fe["applied"] = fmt.Sprintf("has %d entries; at most %d (one per assignment of the box)", len(entries), MaxReportEntries)
			return Report{}, fe
		}
		r.Applied = make([]Applied, 0, len(entries))
		for i, e := range entries {
			path := "applied[" + strconv.Itoa(i) + "]"
			var a Applied
			okEntry := decodeObject(fe, path, e, appliedFields, &a)
			if decodeDownload(fe, path, e, &a) && okEntry {
				r.Applied = append(r.Applied, a)
				var m map[string]json.RawMessage
				if json.Unmarshal(e, &m) == nil && m["kv_cache"] != nil && !isNull(m["kv_cache"]) {
					var kv KVCache
					decodeObject(fe, path+".kv_cache", m["kv_cache"], kvCacheFields, &kv)
				}
			}
		}
	}
	if raw, ok := top["discovered"]; ok && !isNull(raw) {
		decodeObject(fe, "discovered", raw, discoveredFields, &r.Discovered)
	}
	if len(fe) > 0 {
		return Report{}, fe
	}
	if fe = r.Validate(); fe != nil {
		return Report{}, fe
	}
	return r, nil
}

// decodeOne decodes body into v and refuses trailing data.
func decodeOne(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data")
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// nested names the fields decoded on their own (decodeDownload), strictly.
var nested = map[string]bool{"download": true}

// decodeObject decodes the object raw at path into v, recording unknown
// fields and type errors in fe; it reports whether v was decoded. Fields
// in nested are left to their own decoder.
func decodeObject(fe map[string]string, path string, raw json.RawMessage, known []string, v any) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		fe[path] = "must be an object"
		return false
	}
	n := len(fe)
	unknown(fe, path+".", m, known)
	for _, k := range known {
		f, ok := m[k]
		if !ok || nested[k] {
			continue
		}
		// One field at a time, so a type error names its field.
		one, _ := json.Marshal(map[string]json.RawMessage{k: f})
		if err := json.Unmarshal(one, v); err != nil {
			fe[path+"."+k] = "has the wrong type or is out of range for its type"
		}
	}
	return len(fe) == n
}

// decodeDownload decodes an entry's download object strictly (the
// entry's own decoding ignores its unknown fields); it reports whether
// the object, if any, was decoded.
func decodeDownload(fe map[string]string, path string, entry json.RawMessage, a *Applied) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(entry, &m) != nil || m == nil {
		return false
	}
	raw, ok := m["download"]
	if !ok || isNull(raw) {
		a.Download = nil
		return true
	}
	var d Download
	if !decodeObject(fe, path+".download", raw, downloadFields, &d) {
		return false
	}
	a.Download = &d
	return true
}

func unknown(fe map[string]string, prefix string, m map[string]json.RawMessage, known []string) {
	for k := range m {
		if !contains(known, k) {
			fe[prefix+k] = "unknown field"
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Validate checks r's values against the bounds above; nil when r is
// valid.
func (r Report) Validate() map[string]string {
	fe := map[string]string{}
	if len(r.Applied) > MaxReportEntries {
		fe["applied"] = fmt.Sprintf("has %d entries; at most %d (one per assignment of the box)", len(r.Applied), MaxReportEntries)
	}
	first := make(map[int64]int, len(r.Applied))
	for i, a := range r.Applied {
		p := "applied[" + strconv.Itoa(i) + "]"
		if a.HostID < 1 {
			fe[p+".host_id"] = "must be a host id (1 or more)"
		} else if j, dup := first[a.HostID]; dup {
			fe[p+".host_id"] = fmt.Sprintf("repeats applied[%d]: at most one entry per assignment", j)
		} else {
			first[a.HostID] = i
		}
		if why := checkRevision(a.Revision); why != "" {
			fe[p+".revision"] = why
		}
		if why := checkText(a.Error, MaxErrorLen); why != "" {
			fe[p+".error"] = why
		}
		if a.Fit != "" && a.Fit != FitChecked && a.Fit != FitUnchecked {
			fe[p+".fit"] = "must be checked or unchecked"
		}
		if len(a.GPUs) > MaxGPUCount {
			fe[p+".gpus"] = fmt.Sprintf("has more than %d entries", MaxGPUCount)
		}
		for _, g := range a.GPUs {
			if g < 0 || g >= MaxGPUCount {
				fe[p+".gpus"] = fmt.Sprintf("holds GPU indexes 0 to %d", MaxGPUCount-1)
			}
		}
		if kv := a.KVCache; kv != nil {
			switch kv.State {
			case KVCalibrating, KVCalibrated, KVFailed:
			default:
				fe[p+".kv_cache.state"] = "must be calibrating, calibrated or failed"
			}
			if kv.InitialBytes < 0 || kv.InitialBytes > MaxKVCacheBytes {
				fe[p+".kv_cache.initial_bytes"] = fmt.Sprintf("must be 0 to %d", int64(MaxKVCacheBytes))
			}
			if kv.Bytes < 0 || kv.Bytes > MaxKVCacheBytes {
				fe[p+".kv_cache.bytes"] = fmt.Sprintf("must be 0 to %d", int64(MaxKVCacheBytes))
			}
			if why := checkText(kv.Error, MaxErrorLen); why != "" {
				fe[p+".kv_cache.error"] = why
			}
		}
		if d := a.Download; d != nil {
			if d.State != DownloadFetching && d.State != DownloadUnpacking {
				fe[p+".download.state"] = "must be " + DownloadFetching + " or " + DownloadUnpacking
			}
			if d.BytesDone < 0 || d.BytesDone > MaxDownloadBytes {
				fe[p+".download.bytes_done"] = fmt.Sprintf("must be 0 to %d", int64(MaxDownloadBytes))
			}
			if d.BytesTotal < 0 || d.BytesTotal > MaxDownloadBytes {
				fe[p+".download.bytes_total"] = fmt.Sprintf("must be 0 to %d", int64(MaxDownloadBytes))
			}
		}
	}
	d := r.Discovered
	if why := checkName(d.GPU); why != "" {
		fe["discovered.gpu"] = why
	}
	if why := checkName(d.VLLMVersion); why != "" {
		fe["discovered.vllm_version"] = why
	}
	if d.GPUCount < 0 || d.GPUCount > MaxGPUCount {
		fe["discovered.gpu_count"] = fmt.Sprintf("must be 0 to %d", MaxGPUCount)
	}
	if !inRange(d.VRAMGB, MaxVRAMGB) {
		fe["discovered.vram_gb"] = fmt.Sprintf("must be 0 to %d", MaxVRAMGB)
	}
	if !inRange(d.DiskFreeGB, MaxDiskFreeGB) {
		fe["discovered.disk_free_gb"] = fmt.Sprintf("must be 0 to %d", MaxDiskFreeGB)
	}
	if len(fe) == 0 {
		return nil
	}
	return fe
}

func inRange(v, hi float64) bool { return v >= 0 && v <= hi && !math.IsNaN(v) }

func checkRevision(s string) string {
	if len(s) > MaxRevisionLen {
		return fmt.Sprintf("is longer than %d bytes", MaxRevisionLen)
	}
	for _, c := range []byte(s) {
		if !isRevisionByte(c) {
			return "may hold only letters, digits, '.', '_' and '-'"
		}
	}
	return ""
}

func isRevisionByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '.' || c == '_' || c == '-'
}

// checkName checks an identifier the box reports about itself (a GPU
// name, a version): printable UTF-8, none of the characters that make
// markup (<>&"'`).
func checkName(s string) string {
	if len(s) > MaxNameLen {
		return fmt.Sprintf("is longer than %d bytes", MaxNameLen)
	}
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, c := range s {
		if !unicode.IsPrint(c) {
			return "holds a control or non-printing character"
		}
		if strings.ContainsRune(markup, c) {
			return "holds a markup character (one of <>&\"'`)"
		}
	}
	return ""
}

const markup = "<>&\"'`"

// checkText checks free text (an error message): valid UTF-8 within max
// bytes, no control characters but newline and tab.
func checkText(s string, max int) string {
	if len(s) > max {
		return fmt.Sprintf("is longer than %d bytes", max)
	}
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, c := range s {
		if c != '\n' && c != '\t' && unicode.IsControl(c) {
			return "holds a control character"
		}
	}
	return ""
}

// Clip brings r within the bounds Validate checks, for a sender whose
// figures come from the box: text is cut (at a rune boundary) and
// cleaned, numbers are clamped, entries past the first per host are
// dropped. It does not fix host ids or revisions, which the gateway gave.
func (r *Report) Clip() {
	seen := map[int64]bool{}
	out := r.Applied[:0]
	for _, a := range r.Applied {
		if seen[a.HostID] {
			continue
		}
		seen[a.HostID] = true
		a.Error = clipText(cleanText(a.Error), MaxErrorLen)
		if len(a.GPUs) > MaxGPUCount {
			a.GPUs = a.GPUs[:MaxGPUCount]
		}
		if kv := a.KVCache; kv != nil {
			c := *kv
			c.Error = clipText(cleanText(c.Error), MaxErrorLen)
			c.InitialBytes = min(max(c.InitialBytes, 0), MaxKVCacheBytes)
			c.Bytes = min(max(c.Bytes, 0), MaxKVCacheBytes)
			a.KVCache = &c
		}
		if d := a.Download; d != nil {
			c := *d
			c.BytesDone = min(max(c.BytesDone, 0), MaxDownloadBytes)
			c.BytesTotal = min(max(c.BytesTotal, 0), MaxDownloadBytes)
			a.Download = &c
			if c.State != DownloadFetching && c.State != DownloadUnpacking {
				a.Download = nil
			}
		}
		out = append(out, a)
	}
	if len(out) > MaxReportEntries {
		out = out[:MaxReportEntries]
	}
	r.Applied = out
	d := &r.Discovered
	d.GPU = clipText(cleanName(d.GPU), MaxNameLen)
	d.VLLMVersion = clipText(cleanName(d.VLLMVersion), MaxNameLen)
	d.GPUCount = min(max(d.GPUCount, 0), MaxGPUCount)
	d.VRAMGB = clamp(d.VRAMGB, MaxVRAMGB)
	d.DiskFreeGB = clamp(d.DiskFreeGB, MaxDiskFreeGB)
}

func clamp(v, hi float64) float64 {
	if math.IsNaN(v) || v < 0 {
		return 0
	}
	return min(v, hi)
}

// clipText cuts s to at most n bytes without splitting a rune.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 {
		r, size := utf8.DecodeLastRuneInString(s)
		if r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}

func cleanText(s string) string {
	return strings.Map(func(c rune) rune {
		if c == utf8.RuneError || c != '\n' && c != '\t' && unicode.IsControl(c) {
			return ' '
		}
		return c
	}, strings.ToValidUTF8(s, " "))
}

func cleanName(s string) string {
	return strings.Map(func(c rune) rune {
		if !unicode.IsPrint(c) || strings.ContainsRune(markup, c) {
			return ' '
		}
		return c
	}, strings.ToValidUTF8(s, " "))
}

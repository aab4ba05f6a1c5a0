package policy

import (
	"bytes"

	"github.com/rolter/rolter/internal/jsonscan"
)

// The content parts of a message: their text, and the evidence that a part
// is an image, audio or video.

// content reads a message's content: a string, or an array of parts whose
// text parts are counted into msg (nil: count nothing) and whose media parts
// set *media.
func (p *parser) content(v, depth int, msg *seg, media *bool, calls *bool) (int, error) {
	switch p.b[v] {
	case '"':
		if msg == nil {
			return p.skip(v, depth)
		}
		return p.text(v, msg, true)
	case '[':
		return p.array(v, depth, func(e int) (int, error) {
			if p.b[e] == '{' {
				return p.part(e, depth+1, msg, media, calls)
			}
			return p.skip(e, depth+1)
		})
	case '{':
		return p.part(v, depth, nil, media, nil)
	}
	return p.skip(v, depth)
}

type partKind uint8

const (
	partOther partKind = iota
	partText
	partMedia
	partFile
	partToolUse
)

// partKindOf classifies a content part "type".
func partKindOf(t []byte) partKind {
	switch string(t) {
	case "text", "input_text", "output_text":
		return partText
	case "image_url", "input_image", "image", "image_file", "image_embeds", "image_pil",
		"input_audio", "audio", "audio_url",
		"video_url", "video", "input_video",
		"computer_screenshot":
		return partMedia
	case "file", "input_file", "document":
		return partFile
	case "tool_use", "server_tool_use":
		return partToolUse
	}
	return partOther
}

// isMediaKey: the members by which vLLM recognises a part without "type".
func isMediaKey(k []byte) bool {
	switch string(k) {
	case "image_url", "input_image", "image_embeds", "image_pil",
		"input_audio", "audio_url", "video_url":
		return true
	}
	return false
}

// part reads one content part. Its text counts only when its type is a text
// type; a repeated "text" replaces the earlier one.
func (p *parser) part(i, depth int, msg *seg, media *bool, calls *bool) (int, error) {
	var (
		base, tmp                           seg
		kind                                partKind
		typed, textSeen, mediaKey, evidence bool
		buf                                 [24]byte
	)
	if msg != nil {
		base = *msg
	}
	end, err := p.object(i, depth, func(key []byte, v int) (int, error) {
		switch string(key) {
		case "type":
			typed = true
			end, err := p.skip(v, depth+1)
			kind = partOther
			if err == nil && p.b[v] == '"' {
				kind = partKindOf(p.strVal(v, end, buf[:0]))
			}
			return end, err
		case "text":
			textSeen = false
			if msg != nil && p.b[v] == '"' {
				tmp, textSeen = base, true
				return p.text(v, &tmp, true)
			}
		}
		if isMediaKey(key) {
			mediaKey = true
		}
		end, ev, err := p.walk(v, depth+1, key, media)
		evidence = evidence || ev
		return end, err
	})
	if err != nil {
		return 0, err
	}
	if msg != nil && textSeen && kind == partText {
		*msg = tmp
	}
	if kind == partMedia || kind == partFile && evidence || !typed && mediaKey {
		*media = true
	}
	if kind == partToolUse && calls != nil {
		*calls = true
	}
	return end, nil
}

// walk passes over the value of member key inside a content part, looking
// for evidence that a file part holds an image, audio or video (a data: URL
// or MIME type of that kind, or a file name with such an extension), and
// reading nested "content"/"output" parts (Anthropic tool results, Responses
// tool outputs) for media.
func (p *parser) walk(i, depth int, key []byte, media *bool) (end int, ev bool, err error) {
	switch p.b[i] {
	case '"':
		end, _, err := p.str(i)
		if err != nil {
			return 0, false, err
		}
		switch string(key) {
		case "file_data", "file_url", "url", "data", "image_url", "audio_url", "video_url":
			ev = p.strHasPrefixFold(i, end, "data:image/") || p.strHasPrefixFold(i, end, "data:audio/") ||
				p.strHasPrefixFold(i, end, "data:video/")
		case "media_type", "mime_type", "mimeType", "content_type":
			ev = p.strHasPrefixFold(i, end, "image/") || p.strHasPrefixFold(i, end, "audio/") ||
				p.strHasPrefixFold(i, end, "video/")
		case "filename", "file_name", "name":
			ev = p.mediaExt(i, end)
		}
		return end, ev, nil
	case '{':
		if nested(key) {
			end, err := p.part(i, depth, nil, media, nil)
			return end, false, err
		}
		end, err := p.object(i, depth, func(k []byte, v int) (int, error) {
			end, e, err := p.walk(v, depth+1, k, media)
			ev = ev || e
			return end, err
		})
		return end, ev, err
	case '[':
		isParts := nested(key)
		end, err := p.array(i, depth, func(v int) (int, error) {
			if isParts && p.b[v] == '{' {
				return p.part(v, depth+1, nil, media, nil)
			}
			end, e, err := p.walk(v, depth+1, key, media)
			ev = ev || e
			return end, err
		})
		return end, ev, err
	}
	end, err = p.skip(i, depth)
	return end, false, err
}

func nested(key []byte) bool {
	k := string(key)
	return k == "content" || k == "output"
}

// mediaExt reports whether the file name at b[i:end] ends in an image, audio
// or video extension.
func (p *parser) mediaExt(i, end int) bool {
	var buf [64]byte
	name := p.strVal(i, end, buf[:0])
	dot := bytes.LastIndexByte(name, '.')
	if dot < 0 || len(name)-dot > 6 {
		return false
	}
	var ext [6]byte
	n := copy(ext[:], name[dot+1:])
	for k := range n {
		if 'A' <= ext[k] && ext[k] <= 'Z' {
			ext[k] += 'a' - 'A'
		}
	}
	switch string(ext[:n]) {
	case "png", "jpg", "jpeg", "gif", "webp", "bmp", "tif", "tiff", "heic", "heif", "avif", "svg", "ico",
		"mp3", "wav", "m4a", "ogg", "oga", "flac", "aac", "opus", "weba", "mpga", "aiff", "amr",
		"mp4", "mov", "webm", "mkv", "avi", "mpeg", "mpg", "m4v", "3gp", "wmv":
		return true
	}
	return false
}

// strVal returns the decoded contents of the string value at b[i:end]: the
// raw bytes when there is no escape, else decoded into dst.
func (p *parser) strVal(i, end int, dst []byte) []byte { return jsonscan.Unquoted(p.b, i, end, dst) }

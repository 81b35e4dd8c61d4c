// Package importfile reads the files people bring to Curate: Curate's own
// JSONL feedback, OpenAssistant (OASST) message trees (their replies and
// ranked pairs), HH-RLHF preference pairs, and TRL and OpenAI preference
// files (what Curate's exports write, read back). Every reader streams (one line in memory at a time), reads
// plain or gzip-compressed input (told apart by its first bytes), recognises
// a Git LFS pointer checked in instead of the data, and reports bad input as
// a *LineError naming the line and the reason.
//
// Progress is reported by wrapping the input with WithProgress, which counts
// bytes as they are read from the file (compressed bytes for gzip input), so
// it can be compared with the file's size.
//
// The readers return small local types (Message, Pair, OASSTItem); mapping
// them to database rows is the caller's business.
package importfile

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// MaxLineBytes is the longest line accepted, newline excluded. The largest
// HH-RLHF or OASST line is far below it; a longer one means a wrong file.
const MaxLineBytes = 8 << 20

// Errors that a *LineError or a plain error from the readers wraps; test
// for them with errors.Is.
var (
	// ErrLFSPointer: the input is a Git LFS pointer, not the data.
	ErrLFSPointer = errors.New("input is a Git LFS pointer file, not the data it points to")
	// ErrGzip: the input starts like gzip but is not readable as gzip.
	ErrGzip = errors.New("broken gzip data")
	// ErrLineTooLong: a line is longer than MaxLineBytes.
	ErrLineTooLong = fmt.Errorf("line longer than %d bytes", MaxLineBytes)
	// ErrTruncated: the last line has no newline and is not complete JSON,
	// the usual sign of a cut-off upload or download.
	ErrTruncated = errors.New("last line is cut off (no newline at the end and not complete JSON)")
	// ErrInvalidJSON: a line is not one JSON value.
	ErrInvalidJSON = errors.New("invalid JSON")
	// ErrEncoding: a line is not valid UTF-8.
	ErrEncoding = errors.New("not valid UTF-8")
	// ErrEmpty: the input has no JSON lines at all.
	ErrEmpty = errors.New("input has no JSON lines")
)

// LineError is a problem with one line of the input (counted from 1).
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

func (e *LineError) Unwrap() error { return e.Err }

// WithProgress returns a reader that reads from r and calls report with the
// number of bytes read so far and total (the caller's figure for the
// input's size, or -1 when unknown) after every read that returned data.
// The readers in this package read ahead in blocks of 64 KiB, so report is
// called about once per block.
func WithProgress(r io.Reader, total int64, report func(read, total int64)) io.Reader {
	return &progressReader{r: r, total: total, report: report}
}

type progressReader struct {
	r      io.Reader
	read   int64
	total  int64
	report func(read, total int64)
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.read += int64(n)
		p.report(p.read, p.total)
	}
	return n, err
}

const (
	readBlock  = 64 << 10
	lfsVersion = "version https://git-lfs.github.com/spec/v1"
)

var gzipMagic = []byte{0x1f, 0x8b}

// lineReader yields the lines of a plain or gzip input.
type lineReader struct {
	br   *bufio.Reader
	gz   bool
	line int
	buf  []byte
}

func newLineReader(r io.Reader) (*lineReader, error) {
	br := bufio.NewReaderSize(r, readBlock)
	head, err := br.Peek(len(lfsVersion))
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return nil, err
	}
	switch {
	case bytes.HasPrefix(head, gzipMagic):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrGzip, err)
		}
		return &lineReader{br: bufio.NewReaderSize(zr, readBlock), gz: true}, nil
	case string(head) == lfsVersion:
		return nil, lfsError(br)
	}
	return &lineReader{br: br}, nil
}

// lfsError describes the pointer from its oid and size lines.
func lfsError(br *bufio.Reader) error {
	pointer, _ := io.ReadAll(io.LimitReader(br, 1024))
	var oid, size string
	for _, l := range strings.Split(string(pointer), "\n") {
		if v, ok := strings.CutPrefix(l, "oid "); ok {
			oid = v
		} else if v, ok := strings.CutPrefix(l, "size "); ok {
			size = v
		}
	}
	if oid == "" {
		return fmt.Errorf("%w: fetch the real file (git lfs pull) and import that", ErrLFSPointer)
	}
	return fmt.Errorf("%w (object %s, %s bytes): fetch the real file (git lfs pull) and import that", ErrLFSPointer, oid, size)
}

// next returns the next line without its line ending, and whether a newline
// ended it. At the end of the input it returns io.EOF. The returned slice is
// valid until the next call.
func (lr *lineReader) next() ([]byte, bool, error) {
	lr.buf = lr.buf[:0]
	for {
		chunk, err := lr.br.ReadSlice('\n')
		if len(lr.buf)+len(chunk) > MaxLineBytes+1 {
			return nil, false, &LineError{lr.line + 1, ErrLineTooLong}
		}
		switch err {
		case nil:
			lr.line++
			if len(lr.buf) == 0 {
				// The whole line is in the read buffer: no copy.
				return bytes.TrimSuffix(chunk[:len(chunk)-1], []byte{'\r'}), true, nil
			}
			lr.buf = append(lr.buf, chunk...)
			line := bytes.TrimSuffix(lr.buf[:len(lr.buf)-1], []byte{'\r'})
			return line, true, nil
		case bufio.ErrBufferFull:
			lr.buf = append(lr.buf, chunk...)
		case io.EOF:
			lr.buf = append(lr.buf, chunk...)
			if len(lr.buf) == 0 {
				return nil, false, io.EOF
			}
			lr.line++
			return lr.buf, false, nil
		default:
			if lr.gz {
				if errors.Is(err, io.ErrUnexpectedEOF) {
					err = errors.New("compressed data ends early (file truncated?)")
				}
				err = fmt.Errorf("%w: %v", ErrGzip, err)
			}
			return nil, false, &LineError{lr.line + 1, err}
		}
	}
}

// eachLine calls fn with every non-blank line of r, after checking the
// context, the encoding and the length. last reports a line that no newline
// ended (the final line of the input).
func eachLine(ctx context.Context, r io.Reader, fn func(line int, data []byte, last bool) error) error {
	lr, err := newLineReader(r)
	if err != nil {
		return err
	}
	seen := false
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, ended, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if lr.line == 1 {
			data = bytes.TrimPrefix(data, []byte("\uFEFF"))
		}
		if len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		if !utf8.Valid(data) {
			return &LineError{lr.line, fmt.Errorf("%w (first bad byte at column %d)", ErrEncoding, firstInvalid(data)+1)}
		}
		seen = true
		if err := fn(lr.line, data, !ended); err != nil {
			return err
		}
	}
	if !seen {
		return ErrEmpty
	}
	return nil
}

func firstInvalid(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// decodeLine decodes one JSON value from data into v. strict refuses fields
// v does not have. A syntax error on an unterminated last line is reported
// as ErrTruncated.
func decodeLine(line int, data []byte, last, strict bool, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if strict {
		dec.DisallowUnknownFields()
	}
	err := dec.Decode(v)
	if err == nil {
		if _, extra := dec.Token(); extra != io.EOF {
			return &LineError{line, fmt.Errorf("%w: more than one JSON value on the line", ErrInvalidJSON)}
		}
		return nil
	}
	var syntax *json.SyntaxError
	incomplete := errors.As(err, &syntax) || errors.Is(err, io.ErrUnexpectedEOF)
	err = describeJSONError(err)
	if last && incomplete {
		err = fmt.Errorf("%w: %w", ErrTruncated, err)
	}
	return &LineError{line, err}
}

// describeJSONError turns encoding/json's errors into messages that name the
// column or field.
func describeJSONError(err error) error {
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Errorf("%w at column %d: %v", ErrInvalidJSON, syntax.Offset, syntax)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return fmt.Errorf("%w: unexpected end of the line", ErrInvalidJSON)
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return fmt.Errorf("JSON %s where an object was expected", typeErr.Value)
		}
		return fmt.Errorf("field %q: JSON %s cannot be %s", field, typeErr.Value, typeErr.Type)
	}
	// Unknown fields and the like: encoding/json's message names the field.
	return errors.New(strings.TrimPrefix(err.Error(), "json: "))
}

// ReadJSONL decodes every line of r into a T and passes it to fn with its
// line number. Fields T does not have are refused, so a misspelled field is
// an error instead of silently empty. Blank lines are skipped. An error from
// fn stops the read and is returned wrapped in a *LineError.
func ReadJSONL[T any](ctx context.Context, r io.Reader, fn func(line int, v T) error) error {
	return eachLine(ctx, r, func(line int, data []byte, last bool) error {
		var v T
		if err := decodeLine(line, data, last, true, &v); err != nil {
			return err
		}
		if err := fn(line, v); err != nil {
			return lineErr(line, err)
		}
		return nil
	})
}

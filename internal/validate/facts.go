package validate

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Facts are what checking one example alone finds: its findings, its
// token counts and the keys the duplicate checks compare. They depend only
// on the example and on the validator's Profile, never on the other
// examples or the base model's context, so they can be stored with the
// example's content and a later report in the same profile adds them
// (Validator.AddFacts) without checking the example again.
type Facts struct {
	// Findings are the example's own findings; Example is not set.
	Findings  []Finding
	Tokens    int
	Assistant int
	// Sequences holds the tokens of each sequence the trainer reads: the
	// conversation of an SFT example; prompt with chosen and prompt with
	// rejected of a pair. None when the example cannot be written at all.
	Sequences []int
	// HasText is set when the example's text takes part in the duplicate
	// checks; TextKey and Signature are its keys (Signature is nil for a
	// text without words).
	HasText   bool
	TextKey   [16]byte
	Signature *Signature
}

func (fa *Facts) add(sev Severity, code, msg string) {
	fa.Findings = append(fa.Findings, Finding{Severity: sev, Code: code, Message: msg})
}

func (fa *Facts) hasError() bool {
	for _, f := range fa.Findings {
		if f.Severity == Error {
			return true
		}
	}
	return false
}

// Profile names everything an example's facts depend on besides the
// example: the format, the tokenizer, whether PII is looked for, and the
// rules' revision. Facts stored under one profile are valid for every
// validator with the same profile.
func (v *Validator) Profile() string {
	return fmt.Sprintf("%s/%s/pii=%t/r%d", v.opts.Format, v.counter.Encoding(), v.opts.PIIDetector != nil, Revision)
}

// factsVersion numbers the binary form below.
const factsVersion = 1

const (
	flagText = 1 << iota
	flagSignature
)

// MarshalBinary encodes the facts compactly (about 300 bytes for a
// clean example, most of it the signature).
func (fa Facts) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 32+4*numHashes)
	b = append(b, factsVersion)
	b = binary.AppendUvarint(b, uint64(fa.Tokens))
	b = binary.AppendUvarint(b, uint64(fa.Assistant))
	b = binary.AppendUvarint(b, uint64(len(fa.Sequences)))
	for _, n := range fa.Sequences {
		b = binary.AppendUvarint(b, uint64(n))
	}
	var flags byte
	if fa.HasText {
		flags |= flagText
	}
	if fa.Signature != nil {
		flags |= flagSignature
	}
	b = append(b, flags)
	if fa.HasText {
		b = append(b, fa.TextKey[:]...)
	}
	if fa.Signature != nil {
		for _, h := range fa.Signature {
			b = binary.LittleEndian.AppendUint32(b, h)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(fa.Findings)))
	for _, f := range fa.Findings {
		sev := byte(0)
		if f.Severity == Warning {
			sev = 1
		}
		b = append(b, sev)
		b = appendString(b, f.Code)
		b = appendString(b, f.Message)
	}
	return b, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errFacts = errors.New("validate: malformed stored facts")

// UnmarshalBinary decodes facts written by MarshalBinary.
func (fa *Facts) UnmarshalBinary(b []byte) error {
	r := factsReader{b: b}
	if r.byte() != factsVersion {
		return errFacts
	}
	*fa = Facts{Tokens: r.int(), Assistant: r.int()}
	if n := r.int(); n > 0 && n <= 2 {
		fa.Sequences = make([]int, n)
		for i := range fa.Sequences {
			fa.Sequences[i] = r.int()
		}
	} else if n != 0 {
		return errFacts
	}
	flags := r.byte()
	if flags&flagText != 0 {
		fa.HasText = true
		copy(fa.TextKey[:], r.bytes(len(fa.TextKey)))
	}
	if flags&flagSignature != 0 {
		raw := r.bytes(4 * numHashes)
		if raw != nil {
			var sig Signature
			for k := range sig {
				sig[k] = binary.LittleEndian.Uint32(raw[4*k:])
			}
			fa.Signature = &sig
		}
	}
	n := r.int()
	if n > len(b) {
		return errFacts
	}
	for range n {
		sev := Error
		if r.byte() == 1 {
			sev = Warning
		}
		code := string(r.bytes(r.int()))
		msg := string(r.bytes(r.int()))
		fa.Findings = append(fa.Findings, Finding{Severity: sev, Code: code, Message: msg})
	}
	if r.bad || len(r.b) != 0 {
		return errFacts
	}
	return nil
}

// factsReader reads the binary form, remembering the first overrun.
type factsReader struct {
	b   []byte
	bad bool
}

func (r *factsReader) byte() byte {
	if len(r.b) == 0 {
		r.bad = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *factsReader) int() int {
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > 1<<31 {
		r.bad = true
		r.b = nil
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

func (r *factsReader) bytes(n int) []byte {
	if n < 0 || n > len(r.b) {
		r.bad = true
		r.b = nil
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

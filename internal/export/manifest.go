package export

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"slices"
	"strings"
	"time"
)

// Manifest describes one export: written as manifest.json beside the data
// files so a reader can check it has every file, unchanged.
type Manifest struct {
	Format Format `json:"format"`
	// DatasetVersion is the hash identifying the dataset version exported.
	DatasetVersion string `json:"dataset_version"`
	// SplitSeed is the seed the train/eval split was drawn with.
	SplitSeed int64 `json:"split_seed"`
	// Counts is the number of examples per split ("train", "eval", ...).
	Counts map[string]int `json:"counts"`
	Files  []ManifestFile `json:"files"`
	// CreatedAt is supplied by the caller so the encoding stays a pure
	// function of the manifest's fields.
	CreatedAt time.Time `json:"created_at"`
}

// ManifestFile is one data file of an export.
type ManifestFile struct {
	Name   string `json:"name"`
	Split  string `json:"split,omitempty"`
	Rows   int    `json:"rows"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Encode writes the manifest as indented JSON with a final newline. The
// bytes depend only on the fields: keys in a fixed order, counts sorted by
// split name, files sorted by name, the time in UTC.
func (m Manifest) Encode(w io.Writer) error {
	m.Files = slices.Clone(m.Files)
	slices.SortFunc(m.Files, func(a, b ManifestFile) int { return strings.Compare(a.Name, b.Name) })
	m.CreatedAt = m.CreatedAt.UTC()
	if m.Counts == nil {
		m.Counts = map[string]int{}
	}
	if m.Files == nil {
		m.Files = []ManifestFile{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return fmt.Errorf("export: encode manifest: %w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// ReadManifest decodes a manifest written by Encode, refusing unknown keys.
func ReadManifest(r io.Reader) (Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("export: read manifest: %w", err)
	}
	return m, nil
}

// HashingWriter passes writes through to another writer while counting the
// bytes and computing their SHA-256, so a file's manifest entry is known the
// moment it is written, without reading it back.
type HashingWriter struct {
	w io.Writer
	h hash.Hash
	n int64
}

// NewHashingWriter returns a HashingWriter writing to w.
func NewHashingWriter(w io.Writer) *HashingWriter {
	return &HashingWriter{w: w, h: sha256.New()}
}

// Write writes p to the underlying writer and hashes what was written.
func (hw *HashingWriter) Write(p []byte) (int, error) {
	n, err := hw.w.Write(p)
	hw.h.Write(p[:n])
	hw.n += int64(n)
	return n, err
}

// Bytes is the number of bytes written so far.
func (hw *HashingWriter) Bytes() int64 { return hw.n }

// SHA256 is the hex SHA-256 of the bytes written so far.
func (hw *HashingWriter) SHA256() string { return hex.EncodeToString(hw.h.Sum(nil)) }

// File returns the manifest entry for what was written.
func (hw *HashingWriter) File(name, split string, rows int) ManifestFile {
	return ManifestFile{Name: name, Split: split, Rows: rows, Bytes: hw.n, SHA256: hw.SHA256()}
}

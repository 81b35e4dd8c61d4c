package bedrocktest

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// maxObject bounds an object held in memory.
const maxObject = 64 << 20

func (s *Server) putObject(w http.ResponseWriter, r *http.Request) {
	bucket, key := r.PathValue("bucket"), r.PathValue("key")
	body, err := io.ReadAll(io.LimitReader(r.Body, maxObject+1))
	if err == nil && len(body) > maxObject {
		err = errors.New("object too large for the fake")
	}
	if err == nil && isChunked(r) {
		// The SDK frames the body this way only over TLS; the fake
		// serves plain HTTP.
		err = errors.New("aws-chunked bodies are not served by the fake")
	}
	if err != nil {
		writeError(true, w, http.StatusBadRequest, "InvalidRequest", err.Error())
		return
	}
	if n := r.ContentLength; n >= 0 && int64(len(body)) != n {
		writeError(true, w, http.StatusBadRequest, "IncompleteBody", "The request body is shorter than Content-Length.")
		return
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	objects, ok := s.buckets[bucket]
	if !ok {
		writeError(true, w, http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist.")
		return
	}
	if _, exists := objects[key]; !exists {
		s.objectsCreated++
	}
	objects[key] = body
	s.puts++
	w.Header().Set("ETag", etag(body))
	w.WriteHeader(http.StatusOK)
}

// isChunked reports whether the body is in aws-chunked framing, which the
// SDK uses to put a checksum after the data.
func isChunked(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Content-Encoding"), "aws-chunked") ||
		strings.HasPrefix(r.Header.Get("X-Amz-Content-Sha256"), "STREAMING-")
}

func etag(b []byte) string {
	sum := md5.Sum(b)
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

// getObject serves GET and HEAD of an object, and ListObjectsV2 on the
// bucket itself.
func (s *Server) getObject(w http.ResponseWriter, r *http.Request) {
	bucket, key := r.PathValue("bucket"), r.PathValue("key")
	s.mu.Lock()
	defer s.mu.Unlock()
	objects, ok := s.buckets[bucket]
	if !ok {
		writeError(true, w, http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist.")
		return
	}
	if key == "" {
		s.list(w, r, bucket, objects)
		return
	}
	body, ok := objects[key]
	if !ok {
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusNotFound) // HEAD answers carry no body
			return
		}
		writeError(true, w, http.StatusNotFound, "NoSuchKey", "The specified key does not exist.")
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("ETag", etag(body))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

type listResult struct {
	XMLName               xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListBucketResult"`
	Name                  string
	Prefix                string
	KeyCount              int
	MaxKeys               int
	IsTruncated           bool
	ContinuationToken     string `xml:",omitempty"`
	NextContinuationToken string `xml:",omitempty"`
	Contents              []listEntry
}

type listEntry struct {
	Key          string
	Size         int
	ETag         string
	StorageClass string
}

// list answers ListObjectsV2. The caller holds s.mu.
func (s *Server) list(w http.ResponseWriter, r *http.Request, bucket string, objects map[string][]byte) {
	q := r.URL.Query()
	if q.Get("list-type") != "2" {
		writeError(true, w, http.StatusBadRequest, "InvalidRequest", "Only ListObjectsV2 is served.")
		return
	}
	prefix := q.Get("prefix")
	maxKeys := 1000
	if n, err := strconv.Atoi(q.Get("max-keys")); err == nil && n > 0 && n < maxKeys {
		maxKeys = n
	}
	var keys []string
	for k := range objects {
		if strings.HasPrefix(k, prefix) && k > q.Get("continuation-token") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	res := listResult{Name: bucket, Prefix: prefix, MaxKeys: maxKeys, ContinuationToken: q.Get("continuation-token")}
	if len(keys) > maxKeys {
		keys = keys[:maxKeys]
		res.IsTruncated, res.NextContinuationToken = true, keys[len(keys)-1]
	}
	for _, k := range keys {
		res.Contents = append(res.Contents, listEntry{Key: k, Size: len(objects[k]), ETag: etag(objects[k]), StorageClass: "STANDARD"})
	}
	res.KeyCount = len(res.Contents)
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, xml.Header)
	_ = xml.NewEncoder(w).Encode(res)
}

// putLocked stores an object the fake itself writes (job output). The
// caller holds s.mu.
func (s *Server) putLocked(bucket, key string, body []byte) {
	if objects, ok := s.buckets[bucket]; ok {
		objects[key] = body
	}
}

// Package bedrocktest is a test stand-in for Amazon Bedrock's model
// customization API (REST-JSON) and the part of S3 it needs (path-style
// PUT, GET, HEAD and ListObjectsV2), so the production AWS SDK clients talk
// to it unchanged.
//
// Jobs follow a Script driven by how many times the job has been fetched
// (GetModelCustomizationJob), never by the clock: validating, training
// (metrics files growing in the job's S3 output), then Completed, or Failed
// with a message; a stopped job passes through Stopping to Stopped. A
// repeated clientRequestToken returns the job it first made, as Bedrock
// does. Counters report what was created and Inject makes chosen requests
// fail or stall.
package bedrocktest

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Region and Account appear in the ARNs the fake makes.
const (
	Region  = "us-east-1"
	Account = "123456789012"
)

// Bucket is the bucket New creates.
const Bucket = "curate-training"

// Row is one row of a Bedrock metrics file.
type Row struct {
	Step, Epoch      int
	Loss, Perplexity float64
}

// Script is how every job created after SetScript unfolds.
type Script struct {
	ValidatingPolls int // fetches answered InProgress while the data is checked
	TrainingPolls   int // then InProgress while training; each reveals a share of the metrics
	StopPolls       int // fetches answered Stopping after a stop, before Stopped
	// TrainingMetrics and ValidationMetrics are written to the job's output
	// as step_wise_training_metrics.csv and validation_metrics.csv.
	TrainingMetrics   []Row
	ValidationMetrics []Row
	// FailMessage, when set, fails the job after validation with this
	// failureMessage.
	FailMessage string
}

// DefaultScript validates for one fetch, trains for two, then completes on
// the next; four training steps over two epochs, validated after each.
func DefaultScript() Script {
	return Script{
		ValidatingPolls: 1,
		TrainingPolls:   2,
		StopPolls:       1,
		TrainingMetrics: []Row{
			{Step: 0, Epoch: 1, Loss: 2.5, Perplexity: 12.25},
			{Step: 1, Epoch: 1, Loss: 1.75, Perplexity: 5.75},
			{Step: 2, Epoch: 2, Loss: 1.25, Perplexity: 3.5},
			{Step: 3, Epoch: 2, Loss: 1, Perplexity: 2.75},
		},
		ValidationMetrics: []Row{
			{Step: 1, Epoch: 1, Loss: 2, Perplexity: 7.5},
			{Step: 3, Epoch: 2, Loss: 1.5, Perplexity: 4.5},
		},
	}
}

// Fault makes matching requests fail or stall instead of being served.
type Fault struct {
	S3     bool   // match S3 requests instead of Bedrock's
	Method string // "" matches any
	Path   string // a URL path prefix; "" matches any
	// Status answers with this code and an error of type Code. 0 serves
	// the request normally once Delay has passed.
	Status int
	Code   string // e.g. "ThrottlingException"; defaults by status
	// Delay holds the answer back, or until the client gives up.
	Delay time.Duration
	Times int // how many requests it hits; 0 means 1
}

// Server is the fake: a Bedrock control plane and an S3 endpoint.
type Server struct {
	bedrock, s3 *httptest.Server

	// tokenMu serialises creates, so two with one token make one job.
	tokenMu sync.Mutex

	mu             sync.Mutex
	script         Script
	seq            int
	jobs           map[string]*job // by ARN
	jobOrder       []string
	tokens         map[string]string // clientRequestToken -> ARN
	buckets        map[string]map[string][]byte
	faults         []*Fault
	hits           map[string]int
	jobsCreated    int
	objectsCreated int
	puts           int
}

// New starts both endpoints with DefaultScript and the bucket Bucket,
// closed when the test ends.
func New(t testing.TB) *Server {
	s := &Server{
		script:  DefaultScript(),
		jobs:    map[string]*job{},
		tokens:  map[string]string{},
		buckets: map[string]map[string][]byte{Bucket: {}},
		hits:    map[string]int{},
	}
	b := http.NewServeMux()
	b.HandleFunc("POST /model-customization-jobs", s.createJob)
	b.HandleFunc("GET /model-customization-jobs", s.listJobs)
	b.HandleFunc("GET /model-customization-jobs/{id}", s.getJob)
	b.HandleFunc("POST /model-customization-jobs/{id}/stop", s.stopJob)
	s.bedrock = httptest.NewServer(s.middleware(false, b))
	t.Cleanup(s.bedrock.Close)

	o := http.NewServeMux()
	o.HandleFunc("PUT /{bucket}/{key...}", s.putObject)
	o.HandleFunc("GET /{bucket}/{key...}", s.getObject) // GET patterns serve HEAD too
	o.HandleFunc("GET /{bucket}", s.getObject)
	s.s3 = httptest.NewServer(s.middleware(true, o))
	t.Cleanup(s.s3.Close)
	return s
}

// BedrockURL is the base endpoint for the Bedrock client.
func (s *Server) BedrockURL() string { return s.bedrock.URL }

// S3URL is the base endpoint for the S3 client, used path-style.
func (s *Server) S3URL() string { return s.s3.URL }

// SetScript sets the script for jobs created from now on.
func (s *Server) SetScript(sc Script) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = sc
}

// Inject adds a fault.
func (s *Server) Inject(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Times == 0 {
		f.Times = 1
	}
	s.faults = append(s.faults, &f)
}

// JobsCreated counts model customization jobs created (not replays of a
// client request token).
func (s *Server) JobsCreated() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jobsCreated
}

// ObjectsCreated counts S3 objects created by PUT; overwriting an object
// does not count.
func (s *Server) ObjectsCreated() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.objectsCreated
}

// Puts counts S3 PUT requests that stored an object.
func (s *Server) Puts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.puts
}

// Hits counts requests with this method and exact URL path, faulted ones
// included, on the Bedrock endpoint or (s3 true) the S3 one.
func (s *Server) Hits(s3 bool, method, path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[hitKey(s3, method, path)]
}

func hitKey(s3 bool, method, path string) string {
	if s3 {
		return "s3 " + method + " " + path
	}
	return "bedrock " + method + " " + path
}

// Object returns an object's content.
func (s *Server) Object(bucket, key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.buckets[bucket][key]
	return bytes.Clone(b), ok
}

// middleware counts the request, applies faults and checks that the
// request is signed.
func (s *Server) middleware(isS3 bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[hitKey(isS3, r.Method, r.URL.EscapedPath())]++
		fault := s.takeFault(isS3, r)
		s.mu.Unlock()

		if fault != nil {
			if fault.Delay > 0 {
				select {
				case <-time.After(fault.Delay):
				case <-r.Context().Done():
					return
				}
			}
			if fault.Status != 0 {
				code := fault.Code
				if code == "" {
					code = defaultCode(isS3, fault.Status)
				}
				writeError(isS3, w, fault.Status, code, "Injected failure for testing.")
				return
			}
		}
		if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=") {
			code := "UnrecognizedClientException"
			if isS3 {
				code = "AccessDenied"
			}
			writeError(isS3, w, http.StatusForbidden, code, "The request is not signed.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// takeFault returns the first fault matching r and uses up one of its
// hits. The caller holds s.mu.
func (s *Server) takeFault(isS3 bool, r *http.Request) *Fault {
	for i, f := range s.faults {
		if f.S3 == isS3 && (f.Method == "" || f.Method == r.Method) && strings.HasPrefix(r.URL.EscapedPath(), f.Path) {
			f.Times--
			if f.Times == 0 {
				s.faults = append(s.faults[:i], s.faults[i+1:]...)
			}
			return f
		}
	}
	return nil
}

func defaultCode(isS3 bool, status int) string {
	switch {
	case status == http.StatusTooManyRequests && isS3:
		return "SlowDown"
	case status == http.StatusTooManyRequests:
		return "ThrottlingException"
	case status == http.StatusServiceUnavailable && isS3:
		return "ServiceUnavailable"
	case status >= 500 && isS3:
		return "InternalError"
	case status >= 500:
		return "InternalServerException"
	}
	return "ValidationException"
}

// writeError writes the service's error shape: Bedrock's REST-JSON error
// (type in X-Amzn-ErrorType, {"message": ...}) or S3's XML <Error>.
func writeError(isS3 bool, w http.ResponseWriter, status int, code, message string) {
	if isS3 {
		type s3Error struct {
			XMLName   xml.Name `xml:"Error"`
			Code      string
			Message   string
			RequestID string `xml:"RequestId"`
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		_ = xml.NewEncoder(w).Encode(s3Error{Code: code, Message: message, RequestID: "fake-request"})
		return
	}
	w.Header().Set("X-Amzn-ErrorType", code)
	writeJSON(w, status, map[string]string{"message": message})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// next returns the next sequence number, the fake's clock. The caller
// holds s.mu.
func (s *Server) next() int {
	s.seq++
	return s.seq
}

// epoch is the fake's clock origin: timestamps count requests from here.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func stamp(n int) string { return epoch.Add(time.Duration(n) * time.Second).Format(time.RFC3339) }

// Package openaitest is a stand-in for OpenAI's files and fine-tuning API
// and, with SetChat, its chat completions: a local HTTP server answering
// in the API's JSON shapes, so the production client talks to it
// unchanged. Tests start it with New; dev mode starts it
// with Start so fine-tuning jobs run without an OpenAI key.
//
// Jobs follow a Script driven by how many times the job has been fetched
// (GET /v1/fine_tuning/jobs/{id}), never by the clock: validating_files,
// queued, running (a metrics event per step, a checkpoint per epoch), then
// succeeded with a base64-encoded CSV result file, or failed at a chosen
// step. Counters report what was created, an Idempotency-Key replays the
// first answer as OpenAI does, and Inject makes chosen requests fail or
// stall.
package openaitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/curate/curate/internal/provider"
)

// Script is how every job created after SetScript unfolds.
type Script struct {
	FileProcessingPolls int    // fetches of a new file answered "uploaded" before "processed"
	FileError           string // when set, uploaded files end in status "error" with this detail
	ValidatingPolls     int    // job fetches answered "validating_files"
	QueuedPolls         int    // then answered "queued"
	StepsPerPoll        int    // training steps revealed by each running fetch
	// Epochs are run when the request leaves n_epochs auto; 0 follows
	// OpenAI's rule for the training file's size (openai.AutoEpochs).
	Epochs int
	// Metrics are the training steps, in order; their count is the job's
	// total_steps. They appear as metrics events, in checkpoints and in the
	// result file.
	// On success a job reports trained_tokens as OpenAI bills them: the
	// training file's tokens times the epochs run (billing.go).
	Metrics     []provider.StepMetric
	FailAtStep  int    // when > 0 the job fails on reaching this step
	FailMessage string // the failed job's error message
}

// DefaultScript is four steps over two epochs, one step per fetch after one
// fetch each validating and queued, ending in success.
func DefaultScript() Script {
	return Script{
		FileProcessingPolls: 1,
		ValidatingPolls:     1,
		QueuedPolls:         1,
		StepsPerPoll:        1,
		Epochs:              2,
		Metrics: []provider.StepMetric{
			{Step: 1, TrainLoss: ptr(1.5), TrainAccuracy: ptr(0.5)},
			{Step: 2, TrainLoss: ptr(1.25), TrainAccuracy: ptr(0.625), ValidLoss: ptr(1.375), ValidMeanTokenAccuracy: ptr(0.5)},
			{Step: 3, TrainLoss: ptr(0.75), TrainAccuracy: ptr(0.75)},
			{Step: 4, TrainLoss: ptr(0.5), TrainAccuracy: ptr(0.875), ValidLoss: ptr(0.625), ValidMeanTokenAccuracy: ptr(0.75)},
		},
		FailMessage: "The job failed due to an internal error.",
	}
}

// DevScript is a job long enough to watch in dev mode: two fetches
// validating, two queued, then fifteen steps, one step per fetch, with the
// training loss falling and a validation loss every fifth step. "auto"
// epochs follow OpenAI's rule for the file's size, as the estimate does.
func DevScript() Script {
	sc := DefaultScript()
	sc.ValidatingPolls, sc.QueuedPolls, sc.Epochs = 2, 2, 0
	sc.Metrics = nil
	loss, acc := 2.0, 0.4
	for step := 1; step <= 15; step++ {
		loss, acc = loss*0.88, acc+(1-acc)*0.12
		m := provider.StepMetric{Step: step, TrainLoss: ptr(round(loss)), TrainAccuracy: ptr(round(acc))}
		if step%5 == 0 {
			m.ValidLoss, m.ValidMeanTokenAccuracy = ptr(round(loss*1.1)), ptr(round(acc*0.95))
		}
		sc.Metrics = append(sc.Metrics, m)
	}
	return sc
}

func ptr(f float64) *float64 { return &f }

// round keeps four decimals, as OpenAI's metrics carry.
func round(f float64) float64 { return math.Round(f*1e4) / 1e4 }

// Fault makes matching requests fail or stall instead of being served.
type Fault struct {
	Method string // "" matches any
	Path   string // a URL path prefix such as "/v1/fine_tuning/jobs"; "" matches any
	// Status answers with this code and an OpenAI error body. 0 serves the
	// request normally once Delay has passed.
	Status int
	// Delay holds the answer back, or until the client gives up: longer
	// than the client's timeout, it is a timeout.
	Delay time.Duration
	// RetryAfter, when set, is sent as Retry-After-Ms, the header OpenAI's
	// SDKs honour.
	RetryAfter time.Duration
	Times      int // how many requests it hits; 0 means 1
}

// Server is the fake API.
type Server struct {
	srv    *httptest.Server
	apiKey string

	// idemMu serialises requests carrying an Idempotency-Key, so two at
	// once with the same key still make one thing.
	idemMu sync.Mutex

	mu           sync.Mutex
	script       Script
	seq          int
	lastStamp    int64
	files        map[string]*file
	fileOrder    []string
	jobs         map[string]*job
	jobOrder     []string
	idempotent   map[string]stored
	faults       []*Fault
	hits         map[string]int
	filesCreated int
	jobsCreated  int
	chat         ChatFunc
	chatCalls    map[string]int

	// AfterCreate, when set, runs once a job is created and before the
	// answer is written: a test kills the caller there.
	AfterCreate func(id string)
}

type stored struct {
	status int
	body   []byte
}

// Option adjusts a server made by Start.
type Option func(*Server)

// WithScript makes jobs and files follow sc from the start.
func WithScript(sc Script) Option { return func(s *Server) { s.script = sc } }

// Start serves the fake on a free port of 127.0.0.1 until Close, with
// DefaultScript unless an option says otherwise. It accepts any bearer
// token.
func Start(opts ...Option) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("openaitest: %w", err)
	}
	s := &Server{
		script:     DefaultScript(),
		files:      map[string]*file{},
		jobs:       map[string]*job{},
		idempotent: map[string]stored{},
		hits:       map[string]int{},
	}
	for _, o := range opts {
		o(s)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/files", s.createFile)
	mux.HandleFunc("GET /v1/files", s.listFiles)
	mux.HandleFunc("GET /v1/files/{id}", s.getFile)
	mux.HandleFunc("GET /v1/files/{id}/content", s.fileContent)
	mux.HandleFunc("POST /v1/fine_tuning/jobs", s.createJob)
	mux.HandleFunc("GET /v1/fine_tuning/jobs", s.listJobs)
	mux.HandleFunc("GET /v1/fine_tuning/jobs/{id}", s.getJob)
	mux.HandleFunc("GET /v1/fine_tuning/jobs/{id}/events", s.listEvents)
	mux.HandleFunc("GET /v1/fine_tuning/jobs/{id}/checkpoints", s.listCheckpoints)
	mux.HandleFunc("POST /v1/fine_tuning/jobs/{id}/cancel", s.cancelJob)
	mux.HandleFunc("POST /v1/chat/completions", s.chatCompletion)
	// An httptest server given its own listener, so a failure to listen is
	// an error rather than the panic httptest.NewServer raises.
	s.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: s.middleware(mux)}}
	s.srv.Start()
	return s, nil
}

// TB is the part of testing.TB that New uses. Naming it here keeps the
// testing package out of binaries that start the fake with Start.
type TB interface {
	Helper()
	Fatal(args ...any)
	Cleanup(func())
}

// New starts a server with DefaultScript that accepts any bearer token,
// closed when the test ends.
func New(t TB) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Close stops the server, waiting for requests in flight.
func (s *Server) Close() { s.srv.Close() }

// URL is the base URL to give the client, ending in "/v1/".
func (s *Server) URL() string { return s.srv.URL + "/v1/" }

// RequireAPIKey makes the server answer 401 unless this key is sent.
func (s *Server) RequireAPIKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apiKey = key
}

// SetScript sets the script for jobs and files created from now on.
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

// FilesCreated counts files uploaded (not replays of an upload).
func (s *Server) FilesCreated() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.filesCreated
}

// JobsCreated counts fine-tuning jobs created (not replays).
func (s *Server) JobsCreated() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jobsCreated
}

// Hits counts requests with this method and exact URL path, faulted ones
// included, e.g. Hits("POST", "/v1/fine_tuning/jobs").
func (s *Server) Hits(method, path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[method+" "+path]
}

// middleware counts the request, applies faults, checks the bearer token
// and replays answers to a repeated Idempotency-Key.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.Method+" "+r.URL.Path]++
		fault := s.takeFault(r)
		apiKey := s.apiKey
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
				if fault.RetryAfter > 0 {
					w.Header().Set("Retry-After-Ms", fmt.Sprint(fault.RetryAfter.Milliseconds()))
				}
				writeError(w, fault.Status, faultMessage(fault.Status), "", "")
				return
			}
		}

		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" || (apiKey != "" && token != apiKey) {
			writeError(w, http.StatusUnauthorized, "Incorrect API key provided.", "", "invalid_api_key")
			return
		}

		key := r.Header.Get("Idempotency-Key")
		if r.Method != http.MethodPost || key == "" {
			next.ServeHTTP(w, r)
			return
		}
		scope := r.URL.Path + " " + key
		s.idemMu.Lock()
		defer s.idemMu.Unlock()
		s.mu.Lock()
		prev, seen := s.idempotent[scope]
		s.mu.Unlock()
		if seen {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(prev.status)
			_, _ = w.Write(prev.body)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		if rec.Code < 300 {
			s.mu.Lock()
			s.idempotent[scope] = stored{status: rec.Code, body: rec.Body.Bytes()}
			s.mu.Unlock()
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// takeFault returns the first fault matching r and uses up one of its
// hits. The caller holds s.mu.
func (s *Server) takeFault(r *http.Request) *Fault {
	for i, f := range s.faults {
		if (f.Method == "" || f.Method == r.Method) && strings.HasPrefix(r.URL.Path, f.Path) {
			f.Times--
			if f.Times == 0 {
				s.faults = append(s.faults[:i], s.faults[i+1:]...)
			}
			return f
		}
	}
	return nil
}

func faultMessage(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "Rate limit reached for requests. Please try again later."
	case status >= 500:
		return "The server had an error while processing your request. Sorry about that!"
	}
	return http.StatusText(status)
}

// writeError writes OpenAI's error body.
func writeError(w http.ResponseWriter, status int, message, param, code string) {
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	body := map[string]any{"error": map[string]any{
		"message": message, "type": typ, "param": nullable(param), "code": nullable(code),
	}}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// list is OpenAI's cursor page: items newest first, after=<id> continues
// past that item.
func list[T any](r *http.Request, items []T, id func(T) string, defaultLimit int) map[string]any {
	start := 0
	if after := r.URL.Query().Get("after"); after != "" {
		for i, it := range items {
			if id(it) == after {
				start = i + 1
				break
			}
		}
	}
	limit := defaultLimit
	if n, err := parsePositive(r.URL.Query().Get("limit")); err == nil {
		limit = n
	}
	end := min(start+limit, len(items))
	page := items[min(start, end):end]
	out := map[string]any{"object": "list", "data": page, "has_more": end < len(items)}
	if len(page) > 0 {
		out["first_id"], out["last_id"] = id(page[0]), id(page[len(page)-1])
	}
	return out
}

func parsePositive(s string) (int, error) {
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil || n <= 0 {
		return 0, fmt.Errorf("not a positive number: %q", s)
	}
	return n, nil
}

// next returns the next sequence number, for ids. The caller holds s.mu.
func (s *Server) next() int {
	s.seq++
	return s.seq
}

// stamp is the time of something happening now, in unix seconds as the
// API writes it: the real clock, but never the same second twice, so
// events keep their order when sorted by time. The caller holds s.mu.
func (s *Server) stamp() int64 {
	s.lastStamp = max(time.Now().Unix(), s.lastStamp+1)
	return s.lastStamp
}

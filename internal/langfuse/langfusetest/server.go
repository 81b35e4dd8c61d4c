// Package langfusetest runs a fake Langfuse for tests: an httptest server
// that answers the public API endpoints Curate reads (GET /api/public/v3/scores,
// /api/public/v2/scores, /api/public/traces/{traceId}, /api/public/projects)
// in their published shapes, from seeded scores and traces, with Basic auth,
// injectable failures and request counters.
//
// It does not import the client package, so that package's own tests can use it.
package langfusetest

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Endpoint names one route of the fake, for counters and injected failures.
type Endpoint string

const (
	EndpointScoresV3 Endpoint = "GET /api/public/v3/scores"
	EndpointScoresV2 Endpoint = "GET /api/public/v2/scores"
	EndpointTrace    Endpoint = "GET /api/public/traces/{traceId}"
	EndpointProjects Endpoint = "GET /api/public/projects"
)

// Default credentials, used when Options leaves them empty.
const (
	DefaultPublicKey = "pk-lf-test-public"
	DefaultSecretKey = "sk-lf-test-secret"
	ProjectID        = "project-test"
	ProjectName      = "Test project"
)

// Score is a seeded score. Value is the number of NUMERIC scores and 1/0 for
// BOOLEAN ones; StringValue the text of CATEGORICAL, TEXT and CORRECTION
// scores. The fake renders both as each API version does.
type Score struct {
	ID            string
	TraceID       string
	ObservationID string
	SessionID     string // for session scores (no TraceID)
	Name          string
	DataType      string // NUMERIC, BOOLEAN, CATEGORICAL, TEXT, CORRECTION
	Value         float64
	StringValue   string
	Comment       string
	Source        string // default "API"
	AuthorUserID  string
	ConfigID      string
	Timestamp     time.Time
}

// Trace is a seeded trace. Input, Output and Metadata are marshalled as
// JSON: pass a json.RawMessage to control the exact bytes.
type Trace struct {
	ID           string
	Name         string
	Timestamp    time.Time
	Input        any
	Output       any
	SessionID    string
	UserID       string
	Release      string
	Version      string
	Metadata     any
	Tags         []string
	Observations []Observation
}

// Observation is a seeded observation of a trace.
type Observation struct {
	ID                  string
	ParentObservationID string
	Type                string // default "GENERATION"
	Name                string
	Model               string
	StartTime           time.Time
	Input               any
	Output              any
	Metadata            any
}

// Options configure a Server.
type Options struct {
	PublicKey string // default DefaultPublicKey
	SecretKey string // default DefaultSecretKey
	Scores    []Score
	Traces    []Trace
	// PageSize, when positive, caps the page size of both scores endpoints
	// whatever limit the client asks for, to force pagination.
	PageSize int
	// V2Only makes GET /api/public/v3/scores answer 404, as self-hosted
	// Langfuse before v3.179 does.
	V2Only bool
	// V3Only makes GET /api/public/v2/scores answer 404, as Langfuse v4 does.
	V3Only bool
	// RetryAfter, when set, is sent as the Retry-After header of injected
	// 429 and 5xx answers ("0" makes a client retry at once).
	RetryAfter string
	// FailMessage is the message of injected failures (default
	// "injected <status>"): a marker a test can look for where the remote
	// server's words must not go.
	FailMessage string
	// Hold, when set and answering true, keeps a request to ep waiting
	// unanswered until the client gives up: a test kills the caller
	// there.
	Hold func(ep Endpoint) bool
}

// Server is a running fake Langfuse. Its URL field is the host to give a client.
type Server struct {
	*httptest.Server
	PublicKey string
	SecretKey string

	opts     Options
	mu       sync.Mutex
	scores   []Score
	traces   map[string]Trace
	counts   map[Endpoint]int
	failures map[Endpoint][]int
}

// NewServer starts a fake Langfuse and closes it when the test ends.
func NewServer(t testing.TB, opts Options) *Server {
	t.Helper()
	s := &Server{
		PublicKey: cmp.Or(opts.PublicKey, DefaultPublicKey),
		SecretKey: cmp.Or(opts.SecretKey, DefaultSecretKey),
		opts:      opts,
		traces:    map[string]Trace{},
		counts:    map[Endpoint]int{},
		failures:  map[Endpoint][]int{},
	}
	s.AddScores(opts.Scores...)
	s.AddTraces(opts.Traces...)

	mux := http.NewServeMux()
	mux.Handle(string(EndpointScoresV3), s.route(EndpointScoresV3, s.scoresV3))
	mux.Handle(string(EndpointScoresV2), s.route(EndpointScoresV2, s.scoresV2))
	mux.Handle(string(EndpointTrace), s.route(EndpointTrace, s.trace))
	mux.Handle(string(EndpointProjects), s.route(EndpointProjects, s.projects))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "LangfuseNotFoundError", "No route for "+r.Method+" "+r.URL.Path)
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// AddScores seeds more scores, as if they were given after the server started.
func (s *Server) AddScores(scores ...Score) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scores = append(s.scores, scores...)
}

// AddTraces seeds more traces (a trace with a known id replaces the old one).
func (s *Server) AddTraces(traces ...Trace) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range traces {
		s.traces[t.ID] = t
	}
}

// FailNext makes the next n requests to ep answer status (401, 429, 500, ...)
// with a Langfuse-style error body, before authentication is checked.
func (s *Server) FailNext(ep Endpoint, status, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.failures[ep] = append(s.failures[ep], status)
	}
}

// Requests is how many requests reached ep, failed ones included.
func (s *Server) Requests(ep Endpoint) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[ep]
}

// route counts the request, serves an injected failure if one is queued,
// checks Basic auth and then calls h.
func (s *Server) route(ep Endpoint, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.counts[ep]++
		status := 0
		if q := s.failures[ep]; len(q) > 0 {
			status, s.failures[ep] = q[0], q[1:]
		}
		s.mu.Unlock()

		if s.opts.Hold != nil && s.opts.Hold(ep) {
			<-r.Context().Done()
			return
		}
		if status != 0 {
			if s.opts.RetryAfter != "" && (status == http.StatusTooManyRequests || status >= 500) {
				w.Header().Set("Retry-After", s.opts.RetryAfter)
			}
			writeError(w, status, http.StatusText(status), cmp.Or(s.opts.FailMessage, fmt.Sprintf("injected %d", status)))
			return
		}
		user, pass, ok := r.BasicAuth()
		if !ok || user != s.PublicKey || pass != s.SecretKey {
			writeError(w, http.StatusUnauthorized, "UnauthorizedError", "Invalid credentials. Confirm that you've configured the correct host.")
			return
		}
		if (ep == EndpointScoresV3 && s.opts.V2Only) || (ep == EndpointScoresV2 && s.opts.V3Only) {
			writeError(w, http.StatusNotFound, "LangfuseNotFoundError", "Route not found")
			return
		}
		h(w, r)
	})
}

func (s *Server) projects(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{"data": []any{map[string]any{"id": ProjectID, "name": ProjectName}}})
}

// filtered returns the seeded scores at or after fromTimestamp, newest first
// (ties by id, descending), the order Langfuse lists them in.
func (s *Server) filtered(r *http.Request) ([]Score, error) {
	var from time.Time
	if v := r.URL.Query().Get("fromTimestamp"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return nil, fmt.Errorf("fromTimestamp %q is not an ISO 8601 datetime", v)
		}
		from = t
	}
	s.mu.Lock()
	out := make([]Score, 0, len(s.scores))
	for _, sc := range s.scores {
		if from.IsZero() || !sc.Timestamp.Before(from) {
			out = append(out, sc)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Score) int {
		if c := b.Timestamp.Compare(a.Timestamp); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return out, nil
}

// pageSize reads ?limit= (default 50, at most 100) and applies Options.PageSize.
func (s *Server) pageSize(r *http.Request) (int, error) {
	limit := 50
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return 0, fmt.Errorf("limit must be an integer from 1 to 100, got %q", v)
		}
		limit = n
	}
	if s.opts.PageSize > 0 {
		limit = min(limit, s.opts.PageSize)
	}
	return limit, nil
}

// v3Cursor is the position after the last score of a page, encoded as
// URL-safe base64 JSON like Langfuse's own cursors.
type v3Cursor struct {
	LastTimestamp time.Time `json:"lastTimestamp"`
	LastID        string    `json:"lastId"`
}

func (s *Server) scoresV3(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := s.pageSize(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "InvalidRequestError", err.Error())
		return
	}
	groups := map[string]bool{}
	if f := q.Get("fields"); f != "" {
		for _, g := range strings.Split(f, ",") {
			if g != "details" && g != "subject" && g != "annotation" {
				writeError(w, http.StatusBadRequest, "InvalidRequestError", "unknown field group "+strconv.Quote(g))
				return
			}
			groups[g] = true
		}
	}
	all, err := s.filtered(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "InvalidRequestError", err.Error())
		return
	}
	start := 0
	if c := q.Get("cursor"); c != "" {
		raw, err := base64.RawURLEncoding.DecodeString(c)
		var pos v3Cursor
		if err == nil {
			err = json.Unmarshal(raw, &pos)
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, "InvalidRequestError", "invalid cursor")
			return
		}
		// The first score strictly after the cursor in list order.
		start = len(all)
		for i, sc := range all {
			if sc.Timestamp.Before(pos.LastTimestamp) || (sc.Timestamp.Equal(pos.LastTimestamp) && sc.ID < pos.LastID) {
				start = i
				break
			}
		}
	}
	end := min(start+limit, len(all))
	page := all[start:end]
	data := make([]map[string]any, 0, len(page))
	for _, sc := range page {
		data = append(data, renderV3(sc, groups))
	}
	meta := map[string]any{"limit": limit}
	if end < len(all) {
		last := page[len(page)-1]
		b, _ := json.Marshal(v3Cursor{LastTimestamp: last.Timestamp, LastID: last.ID})
		meta["cursor"] = base64.RawURLEncoding.EncodeToString(b)
	}
	writeJSON(w, map[string]any{"data": data, "meta": meta})
}

func renderV3(sc Score, groups map[string]bool) map[string]any {
	m := map[string]any{
		"id":          sc.ID,
		"projectId":   ProjectID,
		"name":        sc.Name,
		"dataType":    sc.DataType,
		"source":      cmp.Or(sc.Source, "API"),
		"timestamp":   stamp(sc.Timestamp),
		"environment": "default",
		"createdAt":   stamp(sc.Timestamp),
		"updatedAt":   stamp(sc.Timestamp),
	}
	switch sc.DataType {
	case "NUMERIC":
		m["value"] = sc.Value
	case "BOOLEAN":
		m["value"] = sc.Value == 1
	default:
		m["value"] = sc.StringValue
	}
	if groups["details"] {
		m["comment"] = nullable(sc.Comment)
		m["configId"] = nullable(sc.ConfigID)
		m["metadata"] = map[string]any{}
	}
	if groups["annotation"] {
		m["authorUserId"] = nullable(sc.AuthorUserID)
		m["queueId"] = nil
	}
	if groups["subject"] {
		switch {
		case sc.ObservationID != "":
			m["subject"] = map[string]any{"kind": "observation", "id": sc.ObservationID, "traceId": sc.TraceID}
		case sc.TraceID != "":
			m["subject"] = map[string]any{"kind": "trace", "id": sc.TraceID}
		case sc.SessionID != "":
			m["subject"] = map[string]any{"kind": "session", "id": sc.SessionID}
		}
	}
	return m
}

func (s *Server) scoresV2(w http.ResponseWriter, r *http.Request) {
	limit, err := s.pageSize(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "InvalidRequestError", err.Error())
		return
	}
	page := 1
	if v := r.URL.Query().Get("page"); v != "" {
		if page, err = strconv.Atoi(v); err != nil || page < 1 {
			writeError(w, http.StatusBadRequest, "InvalidRequestError", "page must be an integer from 1, got "+strconv.Quote(v))
			return
		}
	}
	all, err := s.filtered(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "InvalidRequestError", err.Error())
		return
	}
	start := min((page-1)*limit, len(all))
	end := min(start+limit, len(all))
	data := make([]map[string]any, 0, end-start)
	for _, sc := range all[start:end] {
		m := renderV1(sc)
		s.mu.Lock()
		t, ok := s.traces[sc.TraceID]
		s.mu.Unlock()
		if ok {
			m["trace"] = map[string]any{"userId": nullable(t.UserID), "tags": tags(t.Tags), "environment": "default", "sessionId": nullable(t.SessionID)}
		}
		data = append(data, m)
	}
	writeJSON(w, map[string]any{
		"data": data,
		"meta": map[string]any{
			"page":       page,
			"limit":      limit,
			"totalItems": len(all),
			"totalPages": int(math.Ceil(float64(len(all)) / float64(limit))),
		},
	})
}

// renderV1 is a score as the v1/v2 APIs write it: flat ids, a numeric value
// and a string value by data type.
func renderV1(sc Score) map[string]any {
	m := map[string]any{
		"id":            sc.ID,
		"projectId":     ProjectID,
		"traceId":       nullable(sc.TraceID),
		"observationId": nullable(sc.ObservationID),
		"sessionId":     nullable(sc.SessionID),
		"datasetRunId":  nil,
		"name":          sc.Name,
		"dataType":      sc.DataType,
		"source":        cmp.Or(sc.Source, "API"),
		"timestamp":     stamp(sc.Timestamp),
		"createdAt":     stamp(sc.Timestamp),
		"updatedAt":     stamp(sc.Timestamp),
		"authorUserId":  nullable(sc.AuthorUserID),
		"comment":       nullable(sc.Comment),
		"configId":      nullable(sc.ConfigID),
		"queueId":       nil,
		"environment":   "default",
		"metadata":      map[string]any{},
	}
	switch sc.DataType {
	case "NUMERIC":
		m["value"] = sc.Value
	case "BOOLEAN":
		m["value"] = sc.Value
		m["stringValue"] = map[bool]string{true: "True", false: "False"}[sc.Value == 1]
	case "CATEGORICAL":
		m["value"] = nil
		m["stringValue"] = sc.StringValue
	case "CORRECTION":
		m["value"] = 0
		m["stringValue"] = sc.StringValue
	default:
		m["stringValue"] = sc.StringValue
	}
	return m
}

func (s *Server) trace(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("traceId")
	s.mu.Lock()
	t, ok := s.traces[id]
	scores := []map[string]any{}
	for _, sc := range s.scores {
		if sc.TraceID == id {
			scores = append(scores, renderV1(sc))
		}
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "LangfuseNotFoundError", "Trace "+id+" not found within authorized project")
		return
	}
	obs := make([]map[string]any, 0, len(t.Observations))
	for _, o := range t.Observations {
		obs = append(obs, map[string]any{
			"id":                  o.ID,
			"traceId":             t.ID,
			"type":                cmp.Or(o.Type, "GENERATION"),
			"name":                nullable(o.Name),
			"startTime":           stamp(o.StartTime),
			"endTime":             stamp(o.StartTime),
			"model":               nullable(o.Model),
			"input":               o.Input,
			"output":              o.Output,
			"metadata":            o.Metadata,
			"level":               "DEFAULT",
			"parentObservationId": nullable(o.ParentObservationID),
		})
	}
	writeJSON(w, map[string]any{
		"id":           t.ID,
		"timestamp":    stamp(t.Timestamp),
		"name":         nullable(t.Name),
		"input":        t.Input,
		"output":       t.Output,
		"sessionId":    nullable(t.SessionID),
		"release":      nullable(t.Release),
		"version":      nullable(t.Version),
		"userId":       nullable(t.UserID),
		"metadata":     t.Metadata,
		"tags":         tags(t.Tags),
		"public":       false,
		"environment":  "default",
		"htmlPath":     "/project/" + ProjectID + "/traces/" + t.ID,
		"latency":      0,
		"totalCost":    0,
		"observations": obs,
		"scores":       scores,
	})
}

// stamp writes a time as Langfuse does: UTC with milliseconds.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func tags(t []string) []string {
	if t == nil {
		return []string{}
	}
	return t
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers the {"message", "error"} body Langfuse's public API uses.
func writeError(w http.ResponseWriter, status int, name, message string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": message, "error": name})
}

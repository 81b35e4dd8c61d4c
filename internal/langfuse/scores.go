package langfuse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/curate/curate/internal/errs"
)

// DataType is a score's data type as Langfuse names it.
type DataType string

const (
	DataNumeric     DataType = "NUMERIC"
	DataBoolean     DataType = "BOOLEAN"
	DataCategorical DataType = "CATEGORICAL"
	DataText        DataType = "TEXT"
	DataCorrection  DataType = "CORRECTION" // the corrected output of a trace or observation
)

// Score is one Langfuse score, the same whichever API version delivered it.
type Score struct {
	ID            string
	TraceID       string // empty for session and experiment scores
	ObservationID string // set when the score rates one observation of the trace
	SessionID     string // set for session scores (and, from v2, the trace's session)
	Name          string
	DataType      DataType
	// Value is the number of a NUMERIC score; BOOLEAN scores carry 1 (true)
	// or 0 (false), as v2 sends them and as v3's true/false is converted.
	Value float64
	// StringValue is the category of a CATEGORICAL score, the text of a TEXT
	// score, the corrected output of a CORRECTION score, and "True"/"False"
	// for a BOOLEAN score.
	StringValue  string
	Comment      string
	Source       string // API, ANNOTATION or EVAL
	AuthorUserID string
	ConfigID     string
	Timestamp    time.Time // when the score was given
	CreatedAt    time.Time // when Langfuse stored it
}

// ScoresQuery selects a page of scores.
type ScoresQuery struct {
	// FromTimestamp, when set, keeps scores whose timestamp is at or after it.
	FromTimestamp time.Time
	// Cursor is the NextCursor of the previous page; empty for the first.
	Cursor string
	// Limit is the page size, 1 to 100; 0 means Langfuse's default of 50.
	Limit int
}

// ScorePage is one page of scores.
type ScorePage struct {
	Scores []Score
	// NextCursor fetches the next page; empty on the last page. It is opaque:
	// a v3 cursor as Langfuse issued it, or "v2:<page>" for the v2 API.
	NextCursor string
	// APIVersion is the scores API version that answered: 3 or 2.
	APIVersion int
}

const v2CursorPrefix = "v2:"

// Scores fetches one page of scores. It asks GET /api/public/v3/scores first
// and, when that answers 404, GET /api/public/v2/scores, translating v2's page
// numbers into cursors so the caller loops on NextCursor alone. After one 404
// from v3 the client starts later listings on v2 directly, until v2 in turn
// answers 404 (Langfuse v4 has no v2 scores API).
func (c *Client) Scores(ctx context.Context, q ScoresQuery) (ScorePage, error) {
	if q.Limit < 0 || q.Limit > 100 {
		return ScorePage{}, errs.InvalidField("limit", "must be between 1 and 100 (0 for the default of 50), got %d", q.Limit)
	}
	if strings.HasPrefix(q.Cursor, v2CursorPrefix) {
		page, err := strconv.Atoi(strings.TrimPrefix(q.Cursor, v2CursorPrefix))
		if err != nil || page < 1 {
			return ScorePage{}, errs.InvalidField("cursor", "%q is not a cursor this client issued; start again with an empty cursor", q.Cursor)
		}
		return c.scoresV2(ctx, q, page)
	}
	if q.Cursor == "" && c.version.Load() == 2 {
		page, err := c.scoresV2(ctx, q, 1)
		if !errors.Is(err, ErrNotFound) {
			return page, err
		}
		// Upgraded to Langfuse v4, which drops v2: probe v3 again.
		c.version.Store(0)
	}
	page, err := c.scoresV3(ctx, q)
	if !errors.Is(err, ErrNotFound) {
		return page, err
	}
	// A v3 cursor cannot be resumed on v2; starting over from page 1 is safe
	// because imports are idempotent by score id.
	page, err = c.scoresV2(ctx, q, 1)
	if errors.Is(err, ErrNotFound) {
		return page, fmt.Errorf("%w; neither /api/public/v3/scores nor /api/public/v2/scores exists: is %s the Langfuse base URL (like https://cloud.langfuse.com)?", err, c.base)
	}
	return page, err
}

func (q ScoresQuery) values() url.Values {
	v := url.Values{}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if !q.FromTimestamp.IsZero() {
		v.Set("fromTimestamp", q.FromTimestamp.UTC().Format(timeLayout))
	}
	return v
}

// timeLayout is ISO 8601 with milliseconds, the precision Langfuse stores.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// v3 returns a lean core unless field groups are requested: "subject" holds
// the trace and observation ids, "details" the comment and config id,
// "annotation" the author.
const v3Fields = "subject,details,annotation"

type scoreV3 struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	DataType     DataType        `json:"dataType"`
	Value        json.RawMessage `json:"value"`
	Source       string          `json:"source"`
	Timestamp    time.Time       `json:"timestamp"`
	CreatedAt    time.Time       `json:"createdAt"`
	Comment      string          `json:"comment"`
	ConfigID     string          `json:"configId"`
	AuthorUserID string          `json:"authorUserId"`
	Subject      *struct {
		Kind    string `json:"kind"` // trace, observation, session, experiment
		ID      string `json:"id"`
		TraceID string `json:"traceId"`
	} `json:"subject"`
}

func (c *Client) scoresV3(ctx context.Context, q ScoresQuery) (ScorePage, error) {
	v := q.values()
	v.Set("fields", v3Fields)
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	var resp struct {
		Data []scoreV3 `json:"data"`
		Meta struct {
			Cursor string `json:"cursor"`
		} `json:"meta"`
	}
	if err := c.get(ctx, "/api/public/v3/scores", v, &resp); err != nil {
		return ScorePage{}, err
	}
	page := ScorePage{Scores: make([]Score, 0, len(resp.Data)), NextCursor: resp.Meta.Cursor, APIVersion: 3}
	for _, w := range resp.Data {
		s, err := w.score()
		if err != nil {
			return ScorePage{}, &AnswerError{Host: c.base, Path: "/api/public/v3/scores", Err: err}
		}
		page.Scores = append(page.Scores, s)
	}
	c.version.Store(3)
	return page, nil
}

func (w scoreV3) score() (Score, error) {
	s := Score{
		ID: w.ID, Name: w.Name, DataType: w.DataType, Source: w.Source,
		Timestamp: w.Timestamp, CreatedAt: w.CreatedAt,
		Comment: w.Comment, ConfigID: w.ConfigID, AuthorUserID: w.AuthorUserID,
	}
	if w.Subject != nil {
		switch w.Subject.Kind {
		case "trace":
			s.TraceID = w.Subject.ID
		case "observation":
			s.ObservationID, s.TraceID = w.Subject.ID, w.Subject.TraceID
		case "session":
			s.SessionID = w.Subject.ID
		}
	}
	if len(w.Value) == 0 || string(w.Value) == "null" {
		return s, nil
	}
	var err error
	switch w.DataType {
	case DataNumeric:
		err = json.Unmarshal(w.Value, &s.Value)
	case DataBoolean:
		var b bool
		if err = json.Unmarshal(w.Value, &b); err == nil {
			s.Value, s.StringValue = 0, "False"
			if b {
				s.Value, s.StringValue = 1, "True"
			}
		}
	case DataCategorical, DataText, DataCorrection:
		err = json.Unmarshal(w.Value, &s.StringValue)
	default:
		// A data type newer than this client: keep its value as text and let
		// Map skip it by type.
		s.StringValue = string(w.Value)
	}
	if err != nil {
		return Score{}, fmt.Errorf("score %s: value %s does not fit data type %s", w.ID, w.Value, w.DataType)
	}
	return s, nil
}

type scoreV2 struct {
	ID            string    `json:"id"`
	TraceID       string    `json:"traceId"`
	ObservationID string    `json:"observationId"`
	SessionID     string    `json:"sessionId"`
	Name          string    `json:"name"`
	DataType      DataType  `json:"dataType"`
	Value         *float64  `json:"value"`
	StringValue   string    `json:"stringValue"`
	Source        string    `json:"source"`
	Timestamp     time.Time `json:"timestamp"`
	CreatedAt     time.Time `json:"createdAt"`
	Comment       string    `json:"comment"`
	ConfigID      string    `json:"configId"`
	AuthorUserID  string    `json:"authorUserId"`
	Trace         *struct {
		SessionID string `json:"sessionId"`
	} `json:"trace"`
}

func (c *Client) scoresV2(ctx context.Context, q ScoresQuery, page int) (ScorePage, error) {
	v := q.values()
	v.Set("page", strconv.Itoa(page))
	var resp struct {
		Data []scoreV2 `json:"data"`
		Meta struct {
			Page       int `json:"page"`
			Limit      int `json:"limit"`
			TotalItems int `json:"totalItems"`
			TotalPages int `json:"totalPages"`
		} `json:"meta"`
	}
	if err := c.get(ctx, "/api/public/v2/scores", v, &resp); err != nil {
		return ScorePage{}, err
	}
	out := ScorePage{Scores: make([]Score, 0, len(resp.Data)), APIVersion: 2}
	for _, w := range resp.Data {
		s := Score{
			ID: w.ID, TraceID: w.TraceID, ObservationID: w.ObservationID, SessionID: w.SessionID,
			Name: w.Name, DataType: w.DataType, StringValue: w.StringValue, Source: w.Source,
			Timestamp: w.Timestamp, CreatedAt: w.CreatedAt,
			Comment: w.Comment, ConfigID: w.ConfigID, AuthorUserID: w.AuthorUserID,
		}
		if w.Value != nil {
			s.Value = *w.Value
		}
		if s.SessionID == "" && w.Trace != nil {
			s.SessionID = w.Trace.SessionID
		}
		out.Scores = append(out.Scores, s)
	}
	if page < resp.Meta.TotalPages && len(resp.Data) > 0 {
		out.NextCursor = v2CursorPrefix + strconv.Itoa(page+1)
	}
	c.version.Store(2)
	return out, nil
}

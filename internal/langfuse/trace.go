package langfuse

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"
)

// Trace is one Langfuse trace with its observations, as
// GET /api/public/traces/{traceId} returns it. JSON fields that Langfuse
// sends as null or leaves out are nil.
type Trace struct {
	ID           string
	Name         string
	Timestamp    time.Time
	Input        json.RawMessage
	Output       json.RawMessage
	SessionID    string
	UserID       string
	Release      string
	Version      string
	Metadata     json.RawMessage
	Tags         []string
	Observations []Observation
}

// Observation is one span, generation or event inside a trace.
type Observation struct {
	ID                  string
	TraceID             string
	ParentObservationID string // empty for a root observation
	Type                string // SPAN, GENERATION, EVENT, ...
	Name                string
	Model               string
	StartTime           time.Time
	Input               json.RawMessage
	Output              json.RawMessage
	Metadata            json.RawMessage
}

type traceWire struct {
	ID           string            `json:"id"`
	Name         string            `json:"name"`
	Timestamp    time.Time         `json:"timestamp"`
	Input        json.RawMessage   `json:"input"`
	Output       json.RawMessage   `json:"output"`
	SessionID    string            `json:"sessionId"`
	UserID       string            `json:"userId"`
	Release      string            `json:"release"`
	Version      string            `json:"version"`
	Metadata     json.RawMessage   `json:"metadata"`
	Tags         []string          `json:"tags"`
	Observations []observationWire `json:"observations"`
}

type observationWire struct {
	ID                  string          `json:"id"`
	TraceID             string          `json:"traceId"`
	ParentObservationID string          `json:"parentObservationId"`
	Type                string          `json:"type"`
	Name                string          `json:"name"`
	Model               string          `json:"model"`
	StartTime           time.Time       `json:"startTime"`
	Input               json.RawMessage `json:"input"`
	Output              json.RawMessage `json:"output"`
	Metadata            json.RawMessage `json:"metadata"`
}

// Trace fetches one trace by id. A trace Langfuse does not know gives an
// error matching ErrNotFound; the import job skips its scores.
func (c *Client) Trace(ctx context.Context, id string) (Trace, error) {
	if id == "" {
		return Trace{}, errors.New("langfuse: trace id is empty")
	}
	path := "/api/public/traces/" + url.PathEscape(id)
	var w traceWire
	if err := c.get(ctx, path, nil, &w); err != nil {
		if errors.Is(err, ErrNotFound) {
			return Trace{}, fmt.Errorf("trace %q: %w", id, err)
		}
		return Trace{}, err
	}
	t := Trace{
		ID: w.ID, Name: w.Name, Timestamp: w.Timestamp,
		Input: present(w.Input), Output: present(w.Output),
		SessionID: w.SessionID, UserID: w.UserID, Release: w.Release, Version: w.Version,
		Metadata: present(w.Metadata), Tags: w.Tags,
	}
	for _, o := range w.Observations {
		t.Observations = append(t.Observations, Observation{
			ID: o.ID, TraceID: o.TraceID, ParentObservationID: o.ParentObservationID,
			Type: o.Type, Name: o.Name, Model: o.Model, StartTime: o.StartTime,
			Input: present(o.Input), Output: present(o.Output), Metadata: present(o.Metadata),
		})
	}
	return t, nil
}

// present maps an absent or null JSON value to nil.
func present(raw json.RawMessage) json.RawMessage {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return nil
	}
	return raw
}

// Package feedback stores and reviews what people said about the
// assistant's answers: validation of incoming items, idempotent ingest (one
// item, or a batch loaded with COPY, all or nothing), duplicate and PII
// detection on the way in, the queue's filters, and review actions.
package feedback

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/errs"
)

// Limits on one item. They bound what one request can make us store.
const (
	MaxQuery      = 32 << 10
	MaxResponse   = 64 << 10
	MaxComment    = 8 << 10
	MaxCorrection = 64 << 10
	MaxContext    = 256 << 10 // bytes of the context JSON
	MaxShortField = 256       // ids, model, experiment arm
	MaxTags       = 32
	MaxTagLen     = 64
	MaxBatch      = 10000
	// MaxSkew is how far in the future a given time may lie: the sender's
	// clock may run a little ahead of ours, but feedback is given in the
	// past.
	MaxSkew = 5 * time.Minute
)

// Types, statuses and sources as the API names them.
var (
	Types    = []string{"thumbs_up", "thumbs_down", "neutral", "rating", "correction", "detailed"}
	Statuses = []string{"pending", "approved", "rejected", "needs_correction", "corrected"}
	Sources  = []string{"api", "langfuse", "file", "ui"}
)

// Dimensions are the four aspects rated 1-5.
type Dimensions struct {
	Accuracy    *int `json:"accuracy,omitempty"`
	Helpfulness *int `json:"helpfulness,omitempty"`
	Clarity     *int `json:"clarity,omitempty"`
	Safety      *int `json:"safety,omitempty"`
}

// Item is one feedback item as the API takes it.
type Item struct {
	ExternalID    string          `json:"external_id,omitempty"`
	SessionID     string          `json:"session_id,omitempty"`
	TraceID       string          `json:"trace_id,omitempty"`
	UserID        string          `json:"user_id,omitempty"`
	Query         string          `json:"query"`
	Response      string          `json:"response"`
	Context       json.RawMessage `json:"context,omitempty"`
	Model         string          `json:"model,omitempty"`
	ExperimentArm string          `json:"experiment_arm,omitempty"`
	// Experiment is an experiment's key: the feedback counts for the arm
	// the experiment assigned its user_id.
	Experiment string `json:"experiment,omitempty"`
	// CodebookRules are the codebook rules the answer used: each counts
	// this feedback once as helpful, harmful or neutral.
	CodebookRules []uuid.UUID `json:"codebook_rules,omitempty"`
	FeedbackType  string      `json:"feedback_type"`
	Rating        *int        `json:"rating,omitempty"`
	Dimensions    *Dimensions `json:"dimensions,omitempty"`
	Comment       string      `json:"comment,omitempty"`
	Correction    string      `json:"correction,omitempty"`
	LatencyMS     *int        `json:"latency_ms,omitempty"`
	// Error says the answer was an error (the assistant failed to give
	// one): the production monitors' error rate counts it.
	Error bool     `json:"error,omitempty"`
	Tags  []string `json:"tags,omitempty"`
	// Rank among sibling answers to one prompt (0 = best) and the group's
	// key; set by imports that know rankings.
	Rank      *int   `json:"rank,omitempty"`
	RankGroup string `json:"rank_group,omitempty"`

	// What the API takes under other names (see Incoming) or the service
	// resolves on the way in; never read from JSON into an Item itself.

	// GivenAt is when the feedback was given (created_at, seed 001's
	// timestamp); nil is now. History brought in keeps its dates.
	GivenAt *time.Time `json:"-"`
	// TrainingData is a person's decision on whether the item may be
	// training data (is_training_data), made by DecidedBy; nil lets
	// hygiene's flags decide.
	TrainingData *bool  `json:"-"`
	DecidedBy    string `json:"-"`
	// ResponseID names a logged best-of-N answer (seed 001's
	// response_id, stored as trace_id): its query, answer and context fill
	// in what the item leaves out.
	ResponseID string `json:"-"`
	// CuratorEmail is the organisation's user who gave the feedback (seed
	// 004's curator_email), stored as given_by.
	CuratorEmail string `json:"-"`
	// Organization must name the caller's organisation (seed 004's
	// organization), by name or slug.
	Organization string `json:"-"`
	givenBy      uuid.UUID
	// spelt maps Curate's name of a field to the one the request used
	// (rating → rating_overall), so that errors name what was sent.
	spelt map[string]string
}

// spell records that the request sent Curate's field curate as name.
func (it *Item) spell(curate, name string) {
	if it.spelt == nil {
		it.spelt = map[string]string{}
	}
	it.spelt[curate] = name
}

// fieldName is the request's name for Curate's field name ("rating",
// "dimensions.accuracy").
func (it *Item) fieldName(name string) string {
	head, rest, nested := strings.Cut(name, ".")
	if s, ok := it.spelt[head]; ok {
		if nested {
			return s + "." + rest
		}
		return s
	}
	return name
}

// Validate checks an item, recording a message per bad field under prefix
// (e.g. "items[3]."), and normalises tags.
func (it *Item) Validate(v *errs.Invalid, prefix string) {
	field := func(name string) string { return prefix + it.fieldName(name) }
	text := func(name, value string, max int, required bool) { v.Text(field(name), value, max, required) }
	text("query", it.Query, MaxQuery, true)
	// An item naming a logged answer was given it (or refused naming
	// response_id) before it is validated.
	text("response", it.Response, MaxResponse, it.ResponseID == "")
	text("comment", it.Comment, MaxComment, false)
	text("correction", it.Correction, MaxCorrection, false)
	for name, value := range map[string]string{"external_id": it.ExternalID, "session_id": it.SessionID, "trace_id": it.TraceID,
		"user_id": it.UserID, "model": it.Model, "experiment_arm": it.ExperimentArm, "rank_group": it.RankGroup, "experiment": it.Experiment} {
		text(name, value, MaxShortField, false)
	}
	if !oneOf(it.FeedbackType, Types) {
		v.Add(field("feedback_type"), "must be one of %s", strings.Join(Types, ", "))
	}
	score := func(name string, n *int) {
		if n != nil && (*n < 1 || *n > 5) {
			v.Add(field(name), "must be 1 to 5, not %d", *n)
		}
	}
	score("rating", it.Rating)
	if it.FeedbackType == "rating" && it.Rating == nil {
		v.Add(field("rating"), "is required when feedback_type is rating")
	}
	if it.FeedbackType == "correction" && strings.TrimSpace(it.Correction) == "" {
		v.Add(field("correction"), "is required when feedback_type is correction")
	}
	if d := it.Dimensions; d != nil {
		score("dimensions.accuracy", d.Accuracy)
		score("dimensions.helpfulness", d.Helpfulness)
		score("dimensions.clarity", d.Clarity)
		score("dimensions.safety", d.Safety)
	}
	if it.GivenAt != nil && it.GivenAt.After(time.Now().Add(MaxSkew)) {
		v.Add(field("created_at"), "is %s, in the future: feedback is given in the past", it.GivenAt.UTC().Format(time.RFC3339))
	}
	if it.LatencyMS != nil && (*it.LatencyMS < 0 || *it.LatencyMS > 3_600_000) {
		v.Add(field("latency_ms"), "must be 0 to 3600000")
	}
	if it.Rank != nil && (*it.Rank < 0 || *it.Rank > 100) {
		v.Add(field("rank"), "must be 0 to 100")
	}
	if len(it.Context) > MaxContext {
		v.Add(field("context"), "is %d bytes; at most %d", len(it.Context), MaxContext)
	} else if len(it.Context) > 0 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(it.Context, &obj); err != nil {
			v.Add(field("context"), "must be a JSON object (e.g. {\"documents\": [...], \"messages\": [...]})")
		}
	}
	tags, msg := NormalizeTags(it.Tags)
	if msg != "" {
		v.Add(field("tags"), "%s", msg)
	}
	it.Tags = tags
}

// NormalizeTags trims, lowercases and de-duplicates tags, or says what is wrong.
func NormalizeTags(in []string) ([]string, string) {
	if len(in) > MaxTags {
		return nil, fmt.Sprintf("at most %d tags, not %d", MaxTags, len(in))
	}
	out := make([]string, 0, len(in))
	seen := map[string]bool{}
	for _, t := range in {
		t = strings.ToLower(strings.TrimSpace(t))
		switch {
		case t == "":
			return nil, "tags cannot be empty"
		case len(t) > MaxTagLen || !utf8.ValidString(t):
			return nil, fmt.Sprintf("tag %q: at most %d bytes of UTF-8", truncate(t, 20), MaxTagLen)
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out, ""
}

func oneOf(s string, set []string) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

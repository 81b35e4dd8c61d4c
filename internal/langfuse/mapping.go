package langfuse

import (
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
)

// Feedback types, the values of Curate's feedback_type column.
const (
	TypeThumbsUp   = "thumbs_up"
	TypeThumbsDown = "thumbs_down"
	TypeRating     = "rating"
	TypeCorrection = "correction"
)

// Feedback is one Langfuse score turned into Curate's feedback fields.
type Feedback struct {
	ExternalID string // "langfuse:" + score id; imports are idempotent on it
	TraceID    string
	SessionID  string
	UserID     string
	Query      string
	Response   string
	Model      string
	Type       string // TypeThumbsUp, TypeThumbsDown, TypeRating or TypeCorrection
	Rating     *int   // 1..5, set for TypeRating only
	Correction string // the corrected response, set for TypeCorrection only
	Comment    string
	Tags       []string
	CreatedAt  time.Time // when the score was given
}

// SkipReason says why a score was not imported. The values are short and
// fixed, so an import run can count skipped scores by reason.
type SkipReason string

const (
	SkipNoTrace         SkipReason = "score is not attached to a trace"
	SkipTraceNotFound   SkipReason = "trace not found"
	SkipCategorical     SkipReason = "categorical score"
	SkipText            SkipReason = "text score"
	SkipUnknownType     SkipReason = "unsupported score data type"
	SkipOutOfRange      SkipReason = "score value out of range"
	SkipEmptyCorrection SkipReason = "empty correction"
	SkipNoQuery         SkipReason = "trace has no input"
	SkipNoResponse      SkipReason = "trace has no output"
)

// Mappable tells from the score alone whether Map can use it, so the import
// job fetches traces only for scores it will keep. Map applies the same test.
func Mappable(s Score) (bool, SkipReason) {
	if s.TraceID == "" {
		return false, SkipNoTrace
	}
	_, _, _, ok, reason := kindOf(s)
	return ok, reason
}

// Map turns a score and the trace it rates into feedback. Pass the zero
// Trace when the trace could not be found. It returns false and the reason
// for a score that cannot become feedback.
//
// Kind of feedback, by data type:
//   - BOOLEAN: 1 (true) is thumbs_up, 0 (false) thumbs_down.
//   - NUMERIC whose name reads as a thumbs score (see isThumbsName): 1 is
//     thumbs_up, 0 and -1 are thumbs_down; other values are read as ratings.
//   - NUMERIC otherwise, a rating 1..5: a value from 1 to 5 is rounded to the
//     nearest whole number and used as is; a value from 0 up to (not
//     including) 1 is read as a 0..1 score and scaled to 1 + round(4·value)
//     (0 → 1, 0.5 → 3, 0.9 → 5). A value of exactly 1 is therefore rating 1,
//     the 1..5 reading: user ratings reach Langfuse as 1..5 far more often
//     than as 0..1. Values below 0, above 5, NaN or infinite are skipped.
//   - CORRECTION: its string value is the corrected response; an empty one is
//     skipped. A correction needs the trace input but not its output.
//   - CATEGORICAL and TEXT are skipped: they carry no rating a curator could use.
//
// Query and Response come from the scored observation when the score names
// one that has input and output, else from Trace.Query and Trace.Response.
// Model likewise comes from that observation, else from Trace.Model.
// CreatedAt is the score's timestamp (its creation time when that is unset).
func Map(s Score, t Trace) (Feedback, bool, SkipReason) {
	if ok, reason := Mappable(s); !ok {
		return Feedback{}, false, reason
	}
	if t.ID == "" {
		return Feedback{}, false, SkipTraceNotFound
	}
	typ, rating, correction, _, _ := kindOf(s)

	f := Feedback{
		ExternalID: "langfuse:" + s.ID,
		TraceID:    s.TraceID,
		SessionID:  t.SessionID,
		UserID:     t.UserID,
		Query:      t.Query(),
		Response:   t.Response(),
		Model:      t.Model(),
		Type:       typ,
		Rating:     rating,
		Correction: correction,
		Comment:    s.Comment,
		Tags:       t.Tags,
		CreatedAt:  s.Timestamp,
	}
	if f.SessionID == "" {
		f.SessionID = s.SessionID
	}
	if f.CreatedAt.IsZero() {
		f.CreatedAt = s.CreatedAt
	}
	if o, ok := t.observation(s.ObservationID); ok {
		q, r := QueryText(o.Input), ResponseText(o.Output)
		if strings.TrimSpace(q) != "" && strings.TrimSpace(r) != "" {
			f.Query, f.Response = q, r
		}
		if o.Model != "" {
			f.Model = o.Model
		}
	}
	if strings.TrimSpace(f.Query) == "" {
		return Feedback{}, false, SkipNoQuery
	}
	if strings.TrimSpace(f.Response) == "" && typ != TypeCorrection {
		return Feedback{}, false, SkipNoResponse
	}
	return f, true, ""
}

// kindOf decides the feedback type from the score alone.
func kindOf(s Score) (typ string, rating *int, correction string, ok bool, reason SkipReason) {
	switch s.DataType {
	case DataBoolean:
		switch s.Value {
		case 1:
			return TypeThumbsUp, nil, "", true, ""
		case 0:
			return TypeThumbsDown, nil, "", true, ""
		}
		return "", nil, "", false, SkipOutOfRange
	case DataNumeric:
		if isThumbsName(s.Name) {
			switch s.Value {
			case 1:
				return TypeThumbsUp, nil, "", true, ""
			case 0, -1:
				return TypeThumbsDown, nil, "", true, ""
			}
		}
		r, ok := ratingOf(s.Value)
		if !ok {
			return "", nil, "", false, SkipOutOfRange
		}
		return TypeRating, &r, "", true, ""
	case DataCorrection:
		if strings.TrimSpace(s.StringValue) == "" {
			return "", nil, "", false, SkipEmptyCorrection
		}
		return TypeCorrection, nil, s.StringValue, true, ""
	case DataCategorical:
		return "", nil, "", false, SkipCategorical
	case DataText:
		return "", nil, "", false, SkipText
	}
	return "", nil, "", false, SkipUnknownType
}

// ratingOf reads a numeric score as a 1..5 rating; see Map.
func ratingOf(v float64) (int, bool) {
	switch {
	case math.IsNaN(v) || v < 0 || v > 5:
		return 0, false
	case v >= 1:
		return int(math.Round(v)), true
	default:
		return 1 + int(math.Round(4*v)), true
	}
}

// thumbsNames are score names (lower case, letters and digits only) that
// applications use for a thumbs up/down widget.
var thumbsNames = []string{"userfeedback", "feedback", "like", "likes", "vote", "upvote"}

// isThumbsName reports whether a NUMERIC score's name reads as thumbs
// feedback: it contains "thumb" ("thumbs", "thumbs_up", "user-thumb"), or,
// ignoring case and punctuation, is one of thumbsNames ("user-feedback",
// "user_feedback", "Feedback", "like", "vote", ...).
func isThumbsName(name string) bool {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(r)
		}
	}
	n := b.String()
	return strings.Contains(n, "thumb") || slices.Contains(thumbsNames, n)
}

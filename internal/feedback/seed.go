package feedback

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/curate/curate/internal/errs"
)

// Incoming is a feedback item as the API and the file imports take it:
// Curate's own fields (Item, with created_at and is_training_data), and the
// names two existing systems give them, so that a client written for either
// sends its records unchanged. Seed 001 stores feedback_data records
// ({feedback_id, response_id, user_id, session_id, rating_overall,
// rating_dimensions, text_feedback, reaction_type, context {query,
// previous_messages, user_profile}, timestamp, is_training_data}); seed 004
// stores rlhf_feedback rows ({id, session_id, query, response,
// feedback_type, feedback_value, curator_email, organization, created_at}).
// Map turns either into Curate's Item; the stored item answers in Curate's
// names.
type Incoming struct {
	Item
	// CreatedAt is when the feedback was given (seed 004 names it so too);
	// now when left out, and never in the future.
	CreatedAt json.RawMessage `json:"created_at,omitempty"`
	// IsTrainingData is a person's decision: hygiene's flags never
	// overrule it.
	IsTrainingData *bool `json:"is_training_data,omitempty"`

	// Seed 001's names.
	FeedbackID       *string         `json:"feedback_id,omitempty"`       // external_id
	ResponseID       *string         `json:"response_id,omitempty"`       // trace_id, a logged best-of-N answer
	RatingOverall    *int            `json:"rating_overall,omitempty"`    // rating
	RatingDimensions *Dimensions     `json:"rating_dimensions,omitempty"` // dimensions
	TextFeedback     *string         `json:"text_feedback,omitempty"`     // comment
	ReactionType     *string         `json:"reaction_type,omitempty"`     // feedback_type: thumbs_up, thumbs_down, neutral
	Timestamp        json.RawMessage `json:"timestamp,omitempty"`         // created_at

	// Seed 004's names.
	ID            *string         `json:"id,omitempty"`             // external_id
	FeedbackValue json.RawMessage `json:"feedback_value,omitempty"` // read by feedback_type
	CuratorEmail  *string         `json:"curator_email,omitempty"`  // given_by: the organisation's user
	Organization  *string         `json:"organization,omitempty"`   // must be the caller's organisation
}

// Shapes of the records a file holds; the API takes any of them.
const (
	ShapeAny     = ""
	ShapeSeed001 = "seed001" // seed 001's feedback_data records
	ShapeSeed004 = "seed004" // seed 004's rlhf_feedback rows
)

// Reactions are seed 001's reaction_type values.
var Reactions = []string{"thumbs_up", "thumbs_down", "neutral"}

// Map turns a record into Curate's item, recording a message per bad field
// under prefix (e.g. "items[3]."), named as the record spelt it. shape
// (ShapeSeed001, ShapeSeed004) refuses the other seed's fields, for a
// file said to hold one seed's records. The item still needs the
// service's checks (Validate, and what it names by reference).
func (in Incoming) Map(v *errs.Invalid, prefix, shape string) Item {
	it := in.Item
	field := func(name string) string { return prefix + name }
	// alias reports whether the seed's name was sent, refusing it when
	// Curate's name was sent too.
	alias := func(seed, curate string, seedSent, curateSent bool) bool {
		if seedSent && curateSent {
			v.Add(field(seed), "is %s under another name: send one of them", curate)
			return false
		}
		return seedSent
	}
	in.refuseOtherShape(v, prefix, shape)

	if alias("feedback_id", "external_id", in.FeedbackID != nil, it.ExternalID != "") {
		it.ExternalID = strings.TrimSpace(*in.FeedbackID)
		it.spell("external_id", "feedback_id")
	}
	if alias("id", "external_id", in.ID != nil, it.ExternalID != "" || in.FeedbackID != nil) {
		it.ExternalID = strings.TrimSpace(*in.ID)
		it.spell("external_id", "id")
	}
	if alias("response_id", "trace_id", in.ResponseID != nil, it.TraceID != "") {
		it.TraceID = strings.TrimSpace(*in.ResponseID)
		it.spell("trace_id", "response_id")
		it.ResponseID = it.TraceID
		if it.ResponseID == "" {
			v.Add(field("response_id"), "is empty: name the answer the feedback is about")
		}
	}
	if alias("rating_overall", "rating", in.RatingOverall != nil, it.Rating != nil) {
		it.Rating = in.RatingOverall
		it.spell("rating", "rating_overall")
	}
	if alias("rating_dimensions", "dimensions", in.RatingDimensions != nil, it.Dimensions != nil) {
		it.Dimensions = in.RatingDimensions
		it.spell("dimensions", "rating_dimensions")
	}
	if alias("text_feedback", "comment", in.TextFeedback != nil, it.Comment != "") {
		it.Comment = *in.TextFeedback
		it.spell("comment", "text_feedback")
	}
	if alias("reaction_type", "feedback_type", in.ReactionType != nil, it.FeedbackType != "") {
		if slices.Contains(Reactions, *in.ReactionType) {
			it.FeedbackType = *in.ReactionType
		} else {
			v.Add(field("reaction_type"), "must be one of %s", strings.Join(Reactions, ", "))
		}
	}
	at, atName := in.CreatedAt, "created_at"
	if alias("timestamp", "created_at", isSet(in.Timestamp), isSet(in.CreatedAt)) {
		at, atName = in.Timestamp, "timestamp"
	}
	if isSet(at) {
		if t, ok := parseGivenAt(at); ok {
			it.GivenAt = &t
			it.spell("created_at", atName)
		} else {
			v.Add(field(atName), "must be a time such as \"2025-01-15T10:30:00Z\" (RFC 3339; without a zone it is UTC)")
		}
	}
	it.TrainingData = in.IsTrainingData
	if in.CuratorEmail != nil {
		it.CuratorEmail = strings.TrimSpace(*in.CuratorEmail)
		if it.CuratorEmail == "" || !v.Text(field("curator_email"), it.CuratorEmail, 320, true) {
			v.Add(field("curator_email"), "must be the e-mail address of a user of this organisation")
		}
	}
	if in.Organization != nil {
		it.Organization = strings.TrimSpace(*in.Organization)
		if it.Organization == "" {
			v.Add(field("organization"), "is empty: name this organisation, or leave it out")
		}
	}
	mapContext(v, prefix, &it)
	if isSet(in.FeedbackValue) {
		readValue(v, prefix, in.FeedbackValue, &it)
	}
	if it.FeedbackType == "" {
		// A record that only rated, or only wrote, says so by its fields.
		switch {
		case it.Rating != nil && it.Dimensions == nil:
			it.FeedbackType = "rating"
		case it.Dimensions != nil || it.Comment != "":
			it.FeedbackType = "detailed"
		}
	}
	return it
}

// refuseOtherShape refuses, in a file said to hold one seed's records, the
// fields only the other seed has.
func (in Incoming) refuseOtherShape(v *errs.Invalid, prefix, shape string) {
	seed001 := map[string]bool{"feedback_id": in.FeedbackID != nil, "response_id": in.ResponseID != nil,
		"rating_overall": in.RatingOverall != nil, "rating_dimensions": in.RatingDimensions != nil,
		"text_feedback": in.TextFeedback != nil, "reaction_type": in.ReactionType != nil, "timestamp": isSet(in.Timestamp)}
	seed004 := map[string]bool{"id": in.ID != nil, "feedback_value": isSet(in.FeedbackValue),
		"curator_email": in.CuratorEmail != nil, "organization": in.Organization != nil}
	other, name, kind := seed004, "seed 004's rlhf_feedback rows", ShapeSeed004
	switch shape {
	case ShapeSeed001:
	case ShapeSeed004:
		other, name, kind = seed001, "seed 001's feedback records", ShapeSeed001
	default:
		return
	}
	for _, f := range sortedKeys(other) {
		if other[f] {
			v.Add(prefix+f, "is a field of %s: import such a file as %s", name, kind)
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// isSet reports whether a raw JSON field was sent with a value.
func isSet(raw json.RawMessage) bool {
	return len(raw) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// givenAtLayouts are the ways a time arrives: RFC 3339, and the forms
// PostgreSQL and Python print, with or without a zone (UTC without).
var givenAtLayouts = []string{
	time.RFC3339, "2006-01-02T15:04:05Z07", "2006-01-02T15:04:05",
	"2006-01-02 15:04:05Z07:00", "2006-01-02 15:04:05Z07", "2006-01-02 15:04:05",
}

// parseGivenAt reads a time given as a JSON string.
func parseGivenAt(raw json.RawMessage) (time.Time, bool) {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return time.Time{}, false
	}
	s = strings.TrimSpace(s)
	for _, layout := range givenAtLayouts {
		if t, err := time.Parse(layout, s); err == nil && t.Year() >= 1970 {
			return t, true
		}
	}
	return time.Time{}, false
}

// mapContext keeps seed 001's context as the conversation: its query is
// the item's query when the item has none, its previous_messages are the
// context's earlier messages, and its user_profile (and anything else)
// stays in the context as sent.
func mapContext(v *errs.Invalid, prefix string, it *Item) {
	if !isSet(it.Context) {
		return
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(it.Context, &obj) != nil {
		return // Validate says what a context must be
	}
	changed := false
	if raw, ok := obj["query"]; ok && strings.TrimSpace(it.Query) == "" {
		var q string
		if json.Unmarshal(raw, &q) != nil {
			v.Add(prefix+"context.query", "must be a string: the question the answer was given to")
			return
		}
		it.Query = q
		it.spell("query", "context.query")
		delete(obj, "query")
		changed = true
	}
	if raw, ok := obj["previous_messages"]; ok {
		var list []json.RawMessage
		switch {
		case obj["messages"] != nil:
			v.Add(prefix+"context.previous_messages", "is context.messages under another name: send one of them")
			return
		case json.Unmarshal(raw, &list) != nil:
			v.Add(prefix+"context.previous_messages", "must be an array: the conversation's earlier messages")
			return
		}
		obj["messages"] = raw
		delete(obj, "previous_messages")
		changed = true
	}
	if changed {
		b, err := json.Marshal(obj)
		if err != nil {
			v.Add(prefix+"context", "%v", err)
			return
		}
		it.Context = b
	}
}

// readValue reads seed 004's feedback_value as its feedback_type says: a
// thumb's is true (or a comment), a rating's its number, a correction's
// the corrected answer, a detailed record's its ratings (the four
// dimensions and an overall rating) and comment. An object form takes the
// same things by name, {"rating": 4, "comment": "..."}. What the item also
// sends under Curate's own names is refused here, not read twice.
func readValue(v *errs.Invalid, prefix string, raw json.RawMessage, it *Item) {
	name := prefix + "feedback_value"
	var obj map[string]json.RawMessage
	isObject := json.Unmarshal(raw, &obj) == nil
	var str string
	isString := json.Unmarshal(raw, &str) == nil
	var num float64
	isNumber := json.Unmarshal(raw, &num) == nil

	setComment := func(field string, raw json.RawMessage) {
		var s string
		switch {
		case json.Unmarshal(raw, &s) != nil:
			v.Add(field, "must be a string")
		case it.Comment != "":
			v.Add(field, "is the comment, which comment gives too: send one of them")
		default:
			it.Comment = s
		}
	}
	setScore := func(field string, raw json.RawMessage, dst **int, curate string) {
		n, ok := wholeNumber(raw)
		switch {
		case !ok:
			v.Add(field, "must be a whole number 1 to 5")
		case n < 1 || n > 5:
			v.Add(field, "must be 1 to 5, not %d", n)
		case *dst != nil:
			v.Add(field, "is given by %s too: send one of them", curate)
		default:
			*dst = &n
		}
	}
	// fields reads an object's keys, each with its reader; another key is
	// refused naming what the type takes.
	fields := func(readers map[string]func(string, json.RawMessage)) {
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			read, ok := readers[k]
			if !ok {
				v.Add(name+"."+k, "is not part of a %s's value, which takes %s", it.FeedbackType, strings.Join(slices.Sorted(maps.Keys(readers)), ", "))
				continue
			}
			read(name+"."+k, obj[k])
		}
	}
	comment := func(f string, raw json.RawMessage) { setComment(f, raw) }

	switch it.FeedbackType {
	case "thumbs_up", "thumbs_down", "neutral":
		var b bool
		switch {
		case json.Unmarshal(raw, &b) == nil:
			if !b {
				v.Add(name, "is false: a %s's value is true, a comment or left out", it.FeedbackType)
			}
		case isString:
			setComment(name, raw)
		case isObject:
			fields(map[string]func(string, json.RawMessage){"comment": comment})
		default:
			v.Add(name, "must be true, a comment or {\"comment\": ...} for %s", it.FeedbackType)
		}
	case "rating":
		switch {
		case isNumber:
			setScore(name, raw, &it.Rating, "rating")
		case isObject:
			fields(map[string]func(string, json.RawMessage){
				"rating":  func(f string, r json.RawMessage) { setScore(f, r, &it.Rating, "rating") },
				"comment": comment,
			})
		default:
			v.Add(name, "must be the rating, a whole number 1 to 5, or {\"rating\": ..., \"comment\": ...}")
		}
	case "correction":
		setCorrection := func(f string, r json.RawMessage) {
			var s string
			switch {
			case json.Unmarshal(r, &s) != nil || strings.TrimSpace(s) == "":
				v.Add(f, "must be the corrected answer, a string")
			case it.Correction != "":
				v.Add(f, "is the correction, which correction gives too: send one of them")
			default:
				it.Correction = s
			}
		}
		switch {
		case isString:
			setCorrection(name, raw)
		case isObject:
			fields(map[string]func(string, json.RawMessage){"correction": setCorrection, "comment": comment})
		default:
			v.Add(name, "must be the corrected answer, a string, or {\"correction\": ..., \"comment\": ...}")
		}
	case "detailed":
		if !isObject {
			v.Add(name, "must be an object of ratings: {\"accuracy\", \"helpfulness\", \"clarity\", \"safety\", \"rating\": 1 to 5, \"comment\"}")
			return
		}
		if it.Dimensions == nil {
			it.Dimensions = &Dimensions{}
		} else {
			d := *it.Dimensions
			it.Dimensions = &d
		}
		d := it.Dimensions
		dim := func(dst **int, curate string) func(string, json.RawMessage) {
			return func(f string, r json.RawMessage) { setScore(f, r, dst, curate) }
		}
		fields(map[string]func(string, json.RawMessage){
			"accuracy":    dim(&d.Accuracy, "dimensions.accuracy"),
			"helpfulness": dim(&d.Helpfulness, "dimensions.helpfulness"),
			"clarity":     dim(&d.Clarity, "dimensions.clarity"),
			"safety":      dim(&d.Safety, "dimensions.safety"),
			"rating":      dim(&it.Rating, "rating"),
			"comment":     comment,
		})
	}
	// Another feedback_type is refused by Validate; its value is not read.
}

// wholeNumber reads a JSON number with no fraction (4 or 4.0).
func wholeNumber(raw json.RawMessage) (int, bool) {
	var f float64
	if json.Unmarshal(raw, &f) != nil || f != math.Trunc(f) || math.Abs(f) > 1e6 {
		return 0, false
	}
	return int(f), true
}

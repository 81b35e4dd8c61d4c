package pairs

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/keyset"
)

// Service reads and writes preference pairs for one database.
type Service struct {
	Pool *pgxpool.Pool
}

// New builds the pair service on pool's database.
func New(pool *pgxpool.Pool) *Service { return &Service{Pool: pool} }

// Create validates and stores one pair made by hand (or from a corrected
// item). An identical pair already stored answers errs.Conflict holding it;
// feedback links and the annotator must name items and users of the
// organisation.
func (s *Service) Create(ctx context.Context, actor audit.Actor, orgID uuid.UUID, in Input) (db.PreferencePair, error) {
	var out db.PreferencePair
	err := db.InTx(ctx, s.Pool, func(tx pgx.Tx, _ *db.Queries) error {
		var err error
		out, err = CreateTx(ctx, tx, actor, orgID, in)
		return err
	})
	return out, err
}

// CreateTx is Create in the caller's transaction, for a caller that does
// more with the pair in the same step (a dataset adding it as a member).
func CreateTx(ctx context.Context, tx pgx.Tx, actor audit.Actor, orgID uuid.UUID, in Input) (db.PreferencePair, error) {
	v := &errs.Invalid{}
	in.Validate(v, "")
	if v.Has() {
		return db.PreferencePair{}, v
	}
	q := db.New(tx)
	if err := checkFeedbackLinks(ctx, q, orgID, in.ChosenFeedbackID, in.RejectedFeedbackID); err != nil {
		return db.PreferencePair{}, err
	}
	annotator, err := annotatorOf(ctx, q, actor, orgID, in.AnnotatorID)
	if err != nil {
		return db.PreferencePair{}, err
	}
	prompt, _ := json.Marshal(in.Prompt)
	hash := ContentHash(in.SystemPrompt, in.Prompt, in.Chosen, in.Rejected)
	out, err := q.PairInsert(ctx, db.PairInsertParams{
		OrgID: orgID, Prompt: prompt, Query: in.Query, SystemPrompt: in.SystemPrompt, ChosenResponse: in.Chosen,
		RejectedResponse: in.Rejected, PreferenceStrength: float32(*in.Strength), ContextDocuments: in.ContextDocuments,
		Method: db.PairMethod(in.Method), ChosenFeedbackID: nullID(in.ChosenFeedbackID),
		RejectedFeedbackID: nullID(in.RejectedFeedbackID), AnnotatorID: annotator, AnnotationNotes: in.Notes,
		Tags: in.Tags, ContentHash: hash,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		existing, gerr := q.PairGetByHash(ctx, db.PairGetByHashParams{OrgID: orgID, ContentHash: hash})
		if gerr != nil {
			return out, gerr
		}
		return out, &errs.Conflict{Message: "an identical pair (same prompt, chosen and rejected reply) is already stored", Current: existing}
	}
	if err != nil {
		return out, err
	}
	return out, audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "pair.create", TargetType: "preference_pair",
		TargetID: out.ID.String(), Details: map[string]any{"method": in.Method}})
}

// annotatorOf is the pair's annotator: the user named, who must be one of
// the organisation's, or else the user storing the pair.
func annotatorOf(ctx context.Context, q *db.Queries, actor audit.Actor, orgID uuid.UUID, named *uuid.UUID) (uuid.NullUUID, error) {
	if named == nil {
		return actorUser(actor), nil
	}
	if _, err := q.UserGet(ctx, db.UserGetParams{OrgID: orgID, ID: *named}); errors.Is(err, pgx.ErrNoRows) {
		return uuid.NullUUID{}, errs.InvalidField("annotator_id", "no such user in this organisation")
	} else if err != nil {
		return uuid.NullUUID{}, err
	}
	return uuid.NullUUID{UUID: *named, Valid: true}, nil
}

func checkFeedbackLinks(ctx context.Context, q *db.Queries, orgID uuid.UUID, ids ...*uuid.UUID) error {
	var want []uuid.UUID
	for _, id := range ids {
		if id != nil {
			want = append(want, *id)
		}
	}
	if len(want) == 0 {
		return nil
	}
	rows, err := q.PairListFeedbackByIDs(ctx, db.PairListFeedbackByIDsParams{OrgID: orgID, Ids: want})
	if err != nil {
		return err
	}
	found := map[uuid.UUID]bool{}
	for _, r := range rows {
		found[r.ID] = true
	}
	v := &errs.Invalid{}
	for i, id := range ids {
		if id != nil && !found[*id] {
			v.Add([]string{"chosen_feedback_id", "rejected_feedback_id"}[i], "no such feedback item in this organisation")
		}
	}
	return v.Err()
}

// Detail is a stored pair with its annotator's e-mail.
type Detail struct {
	db.PreferencePair
	AnnotatorEmail string
}

// ByFeedback lists the pairs built from a feedback item, as their chosen
// or their rejected reply, newest first (at most 100).
func (s *Service) ByFeedback(ctx context.Context, orgID, feedbackID uuid.UUID) ([]db.PairListByFeedbackRow, error) {
	return db.New(s.Pool).PairListByFeedback(ctx, db.PairListByFeedbackParams{OrgID: orgID, FeedbackID: uuid.NullUUID{UUID: feedbackID, Valid: true}})
}

// Get returns a pair of the organisation, or errs.ErrNotFound.
func (s *Service) Get(ctx context.Context, orgID, id uuid.UUID) (Detail, error) {
	row, err := db.New(s.Pool).PairGet(ctx, db.PairGetParams{OrgID: orgID, ID: id})
	if err != nil {
		return Detail{}, errs.NotFound(err)
	}
	return Detail{PreferencePair: row.PreferencePair, AnnotatorEmail: row.AnnotatorEmail}, nil
}

// Change is an edit of a stored pair; nil fields stay as they are. Swap
// exchanges the chosen and rejected replies (and their feedback links)
// after the other edits are applied.
type Change struct {
	Query            *string         `json:"query"`
	SystemPrompt     *string         `json:"system_prompt"`
	Chosen           *string         `json:"chosen_response"`
	Rejected         *string         `json:"rejected_response"`
	Strength         *float64        `json:"preference_strength"`
	ContextDocuments json.RawMessage `json:"context_documents"`
	Notes            *string         `json:"annotation_notes"`
	Tags             *[]string       `json:"tags"`
	Swap             bool            `json:"swap"`
	// AnnotatorID names another user of the organisation as the pair's
	// annotator.
	AnnotatorID *uuid.UUID `json:"annotator_id"`
}

// Update applies a change if the pair is still at version; otherwise it
// returns errs.Conflict holding the pair as it is now, so one curator never
// silently overwrites another. An edit that makes the pair identical to
// another stored pair is refused with errs.Conflict too. Version 0 applies
// the change over whatever is stored (last write wins), and the audit
// record says so.
func (s *Service) Update(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID, version int32, ch Change) (db.PreferencePair, error) {
	var out db.PreferencePair
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		cur, err := q.PairGet(ctx, db.PairGetParams{OrgID: orgID, ID: id})
		if err != nil {
			return errs.NotFound(err)
		}
		old := cur.PreferencePair
		asked := version
		if version == 0 {
			version = old.Version // no If-Match: the last write wins
		}
		if old.Version != version {
			return &errs.Conflict{Message: "someone else changed this pair since you opened it: review their change and try again", Current: old}
		}
		in := inputOf(old)
		if ch.Query != nil {
			in.Query = *ch.Query
			if len(in.Prompt) > 0 {
				in.Prompt[len(in.Prompt)-1].Content = *ch.Query
			}
		}
		set := func(dst *string, src *string) {
			if src != nil {
				*dst = *src
			}
		}
		set(&in.SystemPrompt, ch.SystemPrompt)
		set(&in.Chosen, ch.Chosen)
		set(&in.Rejected, ch.Rejected)
		set(&in.Notes, ch.Notes)
		if ch.Strength != nil {
			in.Strength = ch.Strength
		}
		if ch.ContextDocuments != nil {
			in.ContextDocuments = ch.ContextDocuments
		}
		if ch.Tags != nil {
			in.Tags = *ch.Tags
		}
		if ch.Swap {
			in.Chosen, in.Rejected = in.Rejected, in.Chosen
			in.ChosenFeedbackID, in.RejectedFeedbackID = in.RejectedFeedbackID, in.ChosenFeedbackID
		}
		in.Method = "manual" // Validate checks only what an edit can change.
		v := &errs.Invalid{}
		in.Validate(v, "")
		if v.Has() {
			return v
		}
		var annotator uuid.NullUUID
		if ch.AnnotatorID != nil {
			if annotator, err = annotatorOf(ctx, q, actor, orgID, ch.AnnotatorID); err != nil {
				return err
			}
		}
		prompt, _ := json.Marshal(in.Prompt)
		hash := ContentHash(in.SystemPrompt, in.Prompt, in.Chosen, in.Rejected)
		out, err = q.PairUpdate(ctx, db.PairUpdateParams{
			OrgID: orgID, ID: id, Version: version, Prompt: prompt, Query: in.Query, SystemPrompt: in.SystemPrompt,
			ChosenResponse: in.Chosen, RejectedResponse: in.Rejected, PreferenceStrength: float32(*in.Strength),
			ContextDocuments: in.ContextDocuments, ChosenFeedbackID: nullID(in.ChosenFeedbackID),
			RejectedFeedbackID: nullID(in.RejectedFeedbackID), AnnotationNotes: in.Notes, Tags: in.Tags, ContentHash: hash,
			AnnotatorID: annotator,
		})
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return &errs.Conflict{Message: "someone else changed this pair a moment ago: reload it", Current: old}
		case errs.IsUnique(err, "preference_pairs_content_key"):
			return &errs.Conflict{Message: "another stored pair already has this prompt, chosen and rejected reply"}
		case err != nil:
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "pair.update", TargetType: "preference_pair",
			TargetID: id.String(), Details: audit.Unconditional(map[string]any{"version": out.Version, "swap": ch.Swap}, asked)})
	})
	return out, err
}

// Delete removes a pair. A version above 0 must match the stored one.
func (s *Service) Delete(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID, version int32) error {
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		cur, err := q.PairGet(ctx, db.PairGetParams{OrgID: orgID, ID: id})
		if err != nil {
			return errs.NotFound(err)
		}
		if version > 0 && cur.PreferencePair.Version != version {
			return &errs.Conflict{Message: "someone else changed this pair since you opened it: review it before deleting", Current: cur.PreferencePair}
		}
		if _, err := q.PairDelete(ctx, db.PairDeleteParams{OrgID: orgID, ID: id}); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "pair.delete", TargetType: "preference_pair",
			TargetID: id.String(), Details: map[string]any{"method": cur.PreferencePair.Method}})
	})
}

// inputOf turns a stored pair back into editable input.
func inputOf(p db.PreferencePair) Input {
	in := Input{Query: p.Query, SystemPrompt: p.SystemPrompt, Chosen: p.ChosenResponse, Rejected: p.RejectedResponse,
		ContextDocuments: p.ContextDocuments, Notes: p.AnnotationNotes, Tags: p.Tags, Method: string(p.Method)}
	_ = json.Unmarshal(p.Prompt, &in.Prompt)
	st := Strength(p.PreferenceStrength)
	in.Strength = &st
	if p.ChosenFeedbackID.Valid {
		in.ChosenFeedbackID = &p.ChosenFeedbackID.UUID
	}
	if p.RejectedFeedbackID.Valid {
		in.RejectedFeedbackID = &p.RejectedFeedbackID.UUID
	}
	return in
}

// Strength turns a stored strength (a 4-byte float) into the decimal the
// curator set: 0.3 rather than 0.30000001192092896.
func Strength(f float32) float64 { return math.Round(float64(f)*1e4) / 1e4 }

// FromFeedback prefills the editor from a feedback item: a corrected item
// gives chosen = correction, rejected = the original response; any other
// item gives its response as the rejected reply, to be answered with a
// better one. The context's documents come along.
func (s *Service) FromFeedback(ctx context.Context, orgID, feedbackID uuid.UUID) (Input, error) {
	rows, err := db.New(s.Pool).PairListFeedbackByIDs(ctx, db.PairListFeedbackByIDsParams{OrgID: orgID, Ids: []uuid.UUID{feedbackID}})
	if err != nil {
		return Input{}, err
	}
	if len(rows) == 0 {
		return Input{}, errs.ErrNotFound
	}
	f := rows[0]
	id := f.ID
	in := Input{Query: f.Query, Rejected: f.Response, RejectedFeedbackID: &id, Method: "manual",
		ContextDocuments: Documents(f.Context)}
	if strings.TrimSpace(f.Correction) != "" {
		in.Chosen = f.Correction
		in.ChosenFeedbackID = &id
		in.Method = "correction"
	}
	return in, nil
}

// Documents returns the "documents" array of a feedback item's context,
// or an empty array.
func Documents(context json.RawMessage) json.RawMessage {
	var c struct {
		Documents json.RawMessage `json:"documents"`
	}
	if json.Unmarshal(context, &c) == nil && len(c.Documents) > 0 && c.Documents[0] == '[' {
		return c.Documents
	}
	return json.RawMessage("[]")
}

// Filter narrows the list of pairs.
type Filter struct {
	Method     string
	Tag        string
	Q          string    // substring of the query or either reply
	FeedbackID uuid.UUID // pairs made from this item
	DatasetID  uuid.UUID // members of this training dataset
}

// FilterParams are the query parameters ParseFilter reads.
var FilterParams = []string{"method", "tag", "q", "feedback_id", "dataset_id"}

// ParseFilter reads a filter from query parameters.
func ParseFilter(get func(string) string) (Filter, error) {
	v := &errs.Invalid{}
	f := Filter{Method: get("method"), Tag: strings.ToLower(strings.TrimSpace(get("tag"))), Q: strings.TrimSpace(get("q"))}
	if f.Method != "" && !oneOf(f.Method, Methods) {
		v.Add("method", "must be one of %s", strings.Join(Methods, ", "))
	}
	if len(f.Q) > 500 {
		v.Add("q", "at most 500 characters")
	}
	if len(f.Tag) > 64 {
		v.Add("tag", "at most 64 characters")
	}
	if s := get("feedback_id"); s != "" {
		id, err := uuid.Parse(s)
		if err != nil {
			v.Add("feedback_id", "is not a feedback item id")
		}
		f.FeedbackID = id
	}
	if s := get("dataset_id"); s != "" {
		id, err := uuid.Parse(s)
		if err != nil {
			v.Add("dataset_id", "is not a dataset id")
		}
		f.DatasetID = id
	}
	return f, v.Err()
}

// ListName is the name the pair list's keyset cursors carry: a cursor
// from another list is refused.
const ListName = "pairs"

// Page is one keyset page of pairs, newest first.
type Page struct {
	Rows []db.PairListRow
	Next *keyset.Cursor // nil on the last page
}

// List returns a page of the organisation's pairs.
func (s *Service) List(ctx context.Context, orgID uuid.UUID, f Filter, cursor *keyset.Cursor, limit int) (Page, error) {
	p := db.PairListParams{OrgID: orgID, Method: db.NullPairMethod{PairMethod: db.PairMethod(f.Method), Valid: f.Method != ""},
		Tag: f.Tag, Q: f.Q, FeedbackID: nullIDOf(f.FeedbackID), DatasetID: nullIDOf(f.DatasetID), RowLimit: int32(limit + 1)}
	p.CursorTime, p.CursorID = cursor.Bounds()
	rows, err := db.New(s.Pool).PairList(ctx, p)
	if err != nil {
		return Page{}, err
	}
	var page Page
	page.Rows, page.Next = keyset.Page(rows, limit, func(r db.PairListRow) keyset.Cursor { return keyset.Cursor{At: r.CreatedAt, ID: r.ID} })
	return page, nil
}

// ListObjects returns a page of pairs with each pair whole, as the API
// shows it, and the cursor of the next page.
func (s *Service) ListObjects(ctx context.Context, orgID uuid.UUID, f Filter, cursor *keyset.Cursor, limit int) ([]Object, *keyset.Cursor, error) {
	page, err := s.List(ctx, orgID, f, cursor, limit)
	if err != nil || len(page.Rows) == 0 {
		return []Object{}, nil, err
	}
	ids := make([]uuid.UUID, len(page.Rows))
	for i, r := range page.Rows {
		ids[i] = r.ID
	}
	rows, err := db.New(s.Pool).PairListByIDs(ctx, db.PairListByIDsParams{OrgID: orgID, Ids: ids})
	if err != nil {
		return nil, nil, err
	}
	return keyset.InOrder(ids, rows, func(r db.PreferencePair) uuid.UUID { return r.ID }, ToObject), page.Next, nil
}

// Object is a stored pair as the API returns it.
type Object struct {
	ID                 uuid.UUID       `json:"id"`
	Prompt             []Message       `json:"prompt"`
	Query              string          `json:"query"`
	SystemPrompt       string          `json:"system_prompt"`
	ChosenResponse     string          `json:"chosen_response"`
	RejectedResponse   string          `json:"rejected_response"`
	PreferenceStrength float64         `json:"preference_strength"`
	ContextDocuments   json.RawMessage `json:"context_documents"`
	Method             string          `json:"method"`
	ChosenFeedbackID   *uuid.UUID      `json:"chosen_feedback_id"`
	RejectedFeedbackID *uuid.UUID      `json:"rejected_feedback_id"`
	ExternalID         *string         `json:"external_id"`
	AnnotatorID        *uuid.UUID      `json:"annotator_id"`
	AnnotationNotes    string          `json:"annotation_notes"`
	Tags               []string        `json:"tags"`
	CreatedAt          time.Time       `json:"created_at"`
	UpdatedAt          time.Time       `json:"updated_at"`
	Version            int32           `json:"version"`
}

// ToObject turns a row into its API shape.
func ToObject(p db.PreferencePair) Object {
	o := Object{ID: p.ID, Query: p.Query, SystemPrompt: p.SystemPrompt, ChosenResponse: p.ChosenResponse,
		RejectedResponse: p.RejectedResponse, PreferenceStrength: Strength(p.PreferenceStrength),
		ContextDocuments: p.ContextDocuments, Method: string(p.Method), ChosenFeedbackID: idPtr(p.ChosenFeedbackID),
		RejectedFeedbackID: idPtr(p.RejectedFeedbackID), AnnotatorID: idPtr(p.AnnotatorID), AnnotationNotes: p.AnnotationNotes,
		Tags: p.Tags, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt, Version: p.Version, Prompt: []Message{}}
	_ = json.Unmarshal(p.Prompt, &o.Prompt)
	if p.ExternalID.Valid {
		o.ExternalID = &p.ExternalID.String
	}
	return o
}

// Example is the pair in the export package's shape.
func Example(p db.PreferencePair) export.PrefExample {
	o := ToObject(p)
	return export.PrefExample{System: o.SystemPrompt, Prompt: o.Prompt, Chosen: o.ChosenResponse, Rejected: o.RejectedResponse}
}

func idPtr(v uuid.NullUUID) *uuid.UUID {
	if !v.Valid {
		return nil
	}
	return &v.UUID
}

func nullIDOf(id uuid.UUID) uuid.NullUUID { return uuid.NullUUID{UUID: id, Valid: id != uuid.Nil} }

func nullID(id *uuid.UUID) uuid.NullUUID {
	if id == nil {
		return uuid.NullUUID{}
	}
	return uuid.NullUUID{UUID: *id, Valid: true}
}

func actorUser(a audit.Actor) uuid.NullUUID {
	return uuid.NullUUID{UUID: a.ID, Valid: a.Kind == "user" && a.ID != uuid.Nil}
}

package feedback

import (
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/pii"
	"github.com/curate/curate/internal/retention"
)

// Service reads and writes feedback for one database.
type Service struct {
	Pool *pgxpool.Pool
}

// New builds the feedback service on pool's database.
func New(pool *pgxpool.Pool) *Service { return &Service{Pool: pool} }

// Ingest stores one validated item and returns it. When its external_id
// was already stored it stores nothing and returns the stored row with
// created false. One statement: the duplicate link is found by the INSERT.
func (s *Service) Ingest(ctx context.Context, orgID uuid.UUID, source string, it Item) (db.Feedback, bool, error) {
	q := db.New(s.Pool)
	v := &errs.Invalid{}
	if err := newResolver(q, orgID).resolve(ctx, v, &it, ""); err != nil {
		return db.Feedback{}, false, err
	}
	it.Validate(v, "")
	if v.Has() {
		return db.Feedback{}, false, v
	}
	row := toRow(orgID, source, it)
	if err := attribute(ctx, q, orgID, it, &row, ""); err != nil {
		return db.Feedback{}, false, err
	}
	if err := retention.EnsureMonths(ctx, s.Pool, []time.Time{row.CreatedAt}); err != nil {
		return db.Feedback{}, false, err
	}
	if len(it.CodebookRules) > 0 {
		// The item and its rules' counters in one transaction.
		if err := checkRules(ctx, q, orgID, it, ""); err != nil {
			return db.Feedback{}, false, err
		}
		var f db.Feedback
		created := false
		err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
			var err error
			if f, err = insert(ctx, q, insertParams(row)); errors.Is(err, pgx.ErrNoRows) {
				f, err = q.FeedbackGetByExternalID(ctx, db.FeedbackGetByExternalIDParams{OrgID: orgID, ExternalID: row.ExternalID})
				return err
			} else if err != nil {
				return err
			}
			created = true
			return countRules(ctx, q, f.ID, it)
		})
		return f, created, err
	}
	f, err := insert(ctx, q, insertParams(row))
	if errors.Is(err, pgx.ErrNoRows) { // ON CONFLICT DO NOTHING: already stored
		f, err = q.FeedbackGetByExternalID(ctx, db.FeedbackGetByExternalIDParams{OrgID: orgID, ExternalID: row.ExternalID})
		return f, false, err
	}
	return f, err == nil, err
}

// Checker returns a check of items bound for the organisation, as Ingest
// checks them before storing anything: what an item names by reference is
// resolved (and filled in), then the item is validated. A file's import
// checks every line with it before its first batch is stored.
func (s *Service) Checker(orgID uuid.UUID) func(ctx context.Context, it *Item) error {
	r := newResolver(db.New(s.Pool), orgID)
	return func(ctx context.Context, it *Item) error {
		v := &errs.Invalid{}
		if err := r.resolve(ctx, v, it, ""); err != nil {
			return err
		}
		it.Validate(v, "")
		return v.Err()
	}
}

// insert stores one row and returns it as stored: the columns sent, and
// those the database decides (sequence, timestamps, version, duplicate
// link, and the context as jsonb writes it back).
func insert(ctx context.Context, q *db.Queries, p db.FeedbackInsertParams) (db.Feedback, error) {
	r, err := q.FeedbackInsert(ctx, p)
	if err != nil {
		return db.Feedback{}, err
	}
	return db.Feedback{
		ID: p.ID, Seq: r.Seq, OrgID: p.OrgID, ExternalID: p.ExternalID, SessionID: p.SessionID, TraceID: p.TraceID,
		EndUserID: p.EndUserID, Query: p.Query, Response: p.Response, Context: r.Context, Model: p.Model,
		ExperimentArm: p.ExperimentArm, FeedbackType: p.FeedbackType, Rating: p.Rating, DimAccuracy: p.DimAccuracy,
		DimHelpfulness: p.DimHelpfulness, DimClarity: p.DimClarity, DimSafety: p.DimSafety, Comment: p.Comment,
		Correction: p.Correction, LatencyMs: p.LatencyMs, Tags: p.Tags, Status: p.Status, Source: p.Source,
		Rank: p.Rank, RankGroup: p.RankGroup, PiiKinds: p.PiiKinds, ContentHash: p.ContentHash,
		DuplicateOf: r.DuplicateOf, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Version: r.Version,
		ExperimentID: p.ExperimentID, IsError: p.IsError, IsTrainingData: p.IsTrainingData, HygieneFlags: []string{},
		TrainingSetBy: p.TrainingSetBy, GivenBy: p.GivenBy,
	}, nil
}

// insertParams is a row as the one-row insert takes it: a row whose
// CreatedAt is unset is given now by the database.
func insertParams(r db.FeedbackInsertManyParams) db.FeedbackInsertParams {
	var at *time.Time
	if !r.CreatedAt.IsZero() {
		at = &r.CreatedAt
	}
	return db.FeedbackInsertParams{
		ID: r.ID, OrgID: r.OrgID, ExternalID: r.ExternalID, SessionID: r.SessionID, TraceID: r.TraceID, EndUserID: r.EndUserID,
		Query: r.Query, Response: r.Response, Context: r.Context, Model: r.Model, ExperimentArm: r.ExperimentArm,
		FeedbackType: r.FeedbackType, Rating: r.Rating, DimAccuracy: r.DimAccuracy, DimHelpfulness: r.DimHelpfulness,
		DimClarity: r.DimClarity, DimSafety: r.DimSafety, Comment: r.Comment, Correction: r.Correction, LatencyMs: r.LatencyMs,
		Tags: r.Tags, Source: r.Source, Rank: r.Rank, RankGroup: r.RankGroup, PiiKinds: r.PiiKinds, ContentHash: r.ContentHash,
		Status: r.Status, ExperimentID: r.ExperimentID, DuplicateOf: r.DuplicateOf, IsError: r.IsError,
		IsTrainingData: r.IsTrainingData, TrainingSetBy: r.TrainingSetBy, GivenBy: r.GivenBy, CreatedAt: at,
	}
}

// BatchResult says what a batch stored.
type BatchResult struct {
	Inserted   int         `json:"inserted"`
	Duplicates int         `json:"duplicates"` // external ids already stored, or repeated in the batch
	IDs        []uuid.UUID `json:"-"`          // of the inserted rows
}

// IngestBatch validates every item first and stores none unless all are
// valid; then it loads the new ones with COPY in one transaction. Items whose
// external_id is already stored (or repeats within the batch) are counted as
// duplicates and skipped, so re-sending a batch changes nothing.
func (s *Service) IngestBatch(ctx context.Context, orgID uuid.UUID, source string, items []Item) (BatchResult, error) {
	rows, err := batchRows(ctx, db.New(s.Pool), orgID, source, items)
	if err != nil {
		return BatchResult{}, err
	}
	times := make([]time.Time, len(rows))
	for i := range rows {
		times[i] = rows[i].CreatedAt
	}
	if err := retention.EnsureMonths(ctx, s.Pool, times); err != nil {
		return BatchResult{}, err
	}
	return retryOnUnique(func() (res BatchResult, err error) {
		err = db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
			for i := range items {
				field := "items[" + strconv.Itoa(i) + "]."
				if err := attribute(ctx, q, orgID, items[i], &rows[i], field); err != nil {
					return err
				}
				if err := checkRules(ctx, q, orgID, items[i], field); err != nil {
					return err
				}
			}
			if res, err = copyRows(ctx, q, orgID, rows); err != nil {
				return err
			}
			for i := range items {
				if len(items[i].CodebookRules) > 0 && slices.Contains(res.IDs, rows[i].ID) {
					if err := countRules(ctx, q, rows[i].ID, items[i]); err != nil {
						return err
					}
				}
			}
			return nil
		})
		return res, err
	})
}

// batchRows resolves what a batch names by reference (with q) and
// validates it whole, then turns it into rows.
func batchRows(ctx context.Context, q *db.Queries, orgID uuid.UUID, source string, items []Item) ([]db.FeedbackInsertManyParams, error) {
	if len(items) == 0 {
		return nil, errs.InvalidField("items", "send at least one item")
	}
	if len(items) > MaxBatch {
		return nil, errs.InvalidField("items", "at most %d items per batch, not %d", MaxBatch, len(items))
	}
	v := &errs.Invalid{}
	r := newResolver(q, orgID)
	for i := range items {
		if err := r.resolve(ctx, v, &items[i], "items["+strconv.Itoa(i)+"]."); err != nil {
			return nil, err
		}
	}
	for i := range items {
		items[i].Validate(v, "items["+strconv.Itoa(i)+"].")
	}
	if v.Has() {
		return nil, v
	}
	rows := make([]db.FeedbackInsertManyParams, len(items))
	for i, it := range items {
		rows[i] = toRow(orgID, source, it)
	}
	return rows, nil
}

// retryOnUnique runs store again when it fails on the unique index: a
// concurrent writer stored one of our external ids between our check and our
// COPY, and the next try will see it as a duplicate.
func retryOnUnique(store func() (BatchResult, error)) (BatchResult, error) {
	var res BatchResult
	var err error
	for range 3 {
		if res, err = store(); !errs.IsUnique(err, "feedback_external_id_key") {
			break
		}
	}
	return res, err
}

// toRow turns a validated item into a row, computing its PII findings and
// its content hash for duplicate detection.
func toRow(orgID uuid.UUID, source string, it Item) db.FeedbackInsertManyParams {
	id, err := uuid.NewV7() // time-ordered ids keep the primary key's index compact
	if err != nil {
		id = uuid.New()
	}
	ctxJSON := []byte(it.Context)
	if len(ctxJSON) == 0 {
		ctxJSON = []byte("{}")
	}
	d := it.Dimensions
	if d == nil {
		d = &Dimensions{}
	}
	// Everything starts pending, a correction sent by the end user too: a
	// curator reviews it before it can train anything.
	status := db.ReviewStatusPending
	// May it train? The flags decide, unless a person did.
	useIt, decidedBy := true, ""
	if it.TrainingData != nil {
		useIt, decidedBy = *it.TrainingData, it.DecidedBy
		if decidedBy == "" {
			decidedBy = "the sender"
		}
	}
	var at time.Time // unset: now, as the database tells it
	if it.GivenAt != nil {
		at = *it.GivenAt
	}
	return db.FeedbackInsertManyParams{
		ID: id, OrgID: orgID, ExternalID: optText(it.ExternalID), SessionID: it.SessionID, TraceID: it.TraceID,
		EndUserID: it.UserID, Query: it.Query, Response: it.Response, Context: ctxJSON, Model: it.Model,
		ExperimentArm: it.ExperimentArm, FeedbackType: db.FeedbackType(it.FeedbackType), Rating: optInt2(it.Rating),
		DimAccuracy: optInt2(d.Accuracy), DimHelpfulness: optInt2(d.Helpfulness), DimClarity: optInt2(d.Clarity),
		DimSafety: optInt2(d.Safety), Comment: it.Comment, Correction: it.Correction, LatencyMs: optInt4(it.LatencyMS),
		Tags: nonNil(it.Tags), Source: db.FeedbackSource(source), Rank: optInt2(it.Rank), RankGroup: it.RankGroup,
		PiiKinds: piiKinds(it), ContentHash: ContentHash(it.Query, it.Response), Status: status, IsError: it.Error,
		IsTrainingData: useIt, TrainingSetBy: decidedBy, CreatedAt: at,
		GivenBy: uuid.NullUUID{UUID: it.givenBy, Valid: it.givenBy != uuid.Nil},
	}
}

// ContentHash identifies an exact duplicate: the same query and response
// after lowercasing and collapsing white space.
func ContentHash(query, response string) []byte {
	h := sha256.New()
	h.Write([]byte(normalize(query)))
	h.Write([]byte{0})
	h.Write([]byte(normalize(response)))
	return h.Sum(nil)
}

func normalize(s string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(s), unicode.IsSpace), " ")
}

func piiKinds(it Item) []string {
	seen := map[string]bool{}
	var out []string
	for _, text := range []string{it.Query, it.Response, it.Comment, it.Correction} {
		for _, k := range pii.Kinds(text) {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return nonNil(out)
}

func optText(s string) pgtype.Text { return pgtype.Text{String: s, Valid: s != ""} }

func optInt2(n *int) pgtype.Int2 {
	if n == nil {
		return pgtype.Int2{}
	}
	return pgtype.Int2{Int16: int16(*n), Valid: true}
}

func optInt4(n *int) pgtype.Int4 {
	if n == nil {
		return pgtype.Int4{}
	}
	return pgtype.Int4{Int32: int32(*n), Valid: true}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

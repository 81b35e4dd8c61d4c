package pairs

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/feedback"
)

// MaxRank bounds the answers one ranking orders: n answers make
// n·(n−1)/2 pairs.
const MaxRank = 10

// Candidate is one answer to a query that a curator can rank.
type Candidate struct {
	FeedbackID uuid.UUID
	Query      string
	Response   string
	Rating     *int
	Type       string
	Model      string
}

// Candidates returns the distinct answers the organisation's feedback holds
// for query (compared lowercased with white space collapsed), best rated
// first, at most MaxRank.
func (s *Service) Candidates(ctx context.Context, orgID uuid.UUID, query string) ([]Candidate, error) {
	if strings.TrimSpace(query) == "" {
		return nil, errs.InvalidField("query", "is required")
	}
	if len(query) > MaxQuery {
		return nil, errs.InvalidField("query", "at most %d bytes", MaxQuery)
	}
	rows, err := db.New(s.Pool).PairListRankCandidates(ctx, db.PairListRankCandidatesParams{OrgID: orgID, Query: query, RowLimit: 200})
	if err != nil {
		return nil, err
	}
	out := make([]Candidate, len(rows))
	for i, r := range rows {
		out[i] = Candidate{FeedbackID: r.ID, Query: r.Query, Response: r.Response, Type: string(r.FeedbackType), Model: r.Model}
		if r.Rating.Valid {
			n := int(r.Rating.Int16)
			out[i].Rating = &n
		}
	}
	rating := func(c Candidate) int {
		if c.Rating == nil {
			return 0
		}
		return *c.Rating
	}
	slices.SortStableFunc(out, func(a, b Candidate) int { return rating(b) - rating(a) })
	if len(out) > MaxRank {
		out = out[:MaxRank]
	}
	return out, nil
}

// RankQuery is a query a curator can rank: its text and how many different
// answers to it are stored.
type RankQuery struct {
	Query   string
	Answers int
}

// MaxRankQueries is how many suggestions RankQueries offers.
const MaxRankQueries = 10

// RankQueries suggests queries to rank as a curator types: those of the
// organisation whose text holds search, ignoring case, with at least two
// different answers, most answers first.
func (s *Service) RankQueries(ctx context.Context, orgID uuid.UUID, search string) ([]RankQuery, error) {
	search = strings.TrimSpace(search)
	switch {
	case len(search) > MaxQuery:
		return nil, errs.InvalidField("query", "at most %d bytes", MaxQuery)
	case !utf8.ValidString(search) || strings.ContainsRune(search, 0):
		return nil, errs.InvalidField("query", "is not valid UTF-8 text")
	}
	rows, err := db.New(s.Pool).PairListRankQueries(ctx, db.PairListRankQueriesParams{OrgID: orgID, Search: search, RowLimit: MaxRankQueries})
	if err != nil {
		return nil, err
	}
	out := make([]RankQuery, len(rows))
	for i, r := range rows {
		out[i] = RankQuery{Query: r.Query, Answers: int(r.Answers)}
	}
	return out, nil
}

// Ranking is a curator's order of answers to one query, best first.
type Ranking struct {
	Query string
	Order []uuid.UUID // feedback item ids, best first
	Notes string
	Tags  []string
}

// Implication is one pair a ranking implies: indexes into the order of the
// better and the worse answer, and the preference's strength.
type Implication struct {
	Better, Worse int
	Strength      float64
}

// Implied returns the pairs a ranking of n answers implies: every two
// answers make a pair, n·(n−1)/2 in all, and the strength is the rank gap
// over the largest possible gap, so the best against the worst is 1.
func Implied(n int) []Implication {
	var out []Implication
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			out = append(out, Implication{Better: i, Worse: j, Strength: float64(j-i) / float64(n-1)})
		}
	}
	return out
}

// SaveRanking stores every pair a ranking implies (method "ranking"),
// leaving out those already stored. The answers must be items of the
// organisation sharing the query, with different responses.
func (s *Service) SaveRanking(ctx context.Context, actor audit.Actor, orgID uuid.UUID, r Ranking) (Result, error) {
	v := &errs.Invalid{}
	switch {
	case len(r.Order) < 2:
		v.Add("order", "rank at least 2 answers")
	case len(r.Order) > MaxRank:
		v.Add("order", "rank at most %d answers", MaxRank)
	}
	seen := map[uuid.UUID]bool{}
	for _, id := range r.Order {
		if seen[id] {
			v.Add("order", "each answer may appear once")
			break
		}
		seen[id] = true
	}
	if len(r.Notes) > MaxNotes {
		v.Add("annotation_notes", "at most %d bytes", MaxNotes)
	}
	tags, msg := feedback.NormalizeTags(r.Tags)
	if msg != "" {
		v.Add("tags", "%s", msg)
	}
	if v.Has() {
		return Result{}, v
	}
	var res Result
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		rows, err := q.PairListFeedbackByIDs(ctx, db.PairListFeedbackByIDsParams{OrgID: orgID, Ids: r.Order})
		if err != nil {
			return err
		}
		byID := map[uuid.UUID]db.PairListFeedbackByIDsRow{}
		for _, row := range rows {
			byID[row.ID] = row
		}
		items := make([]db.PairListFeedbackByIDsRow, len(r.Order))
		texts := map[string]bool{}
		for i, id := range r.Order {
			row, ok := byID[id]
			switch {
			case !ok:
				return errs.InvalidField("order", "no feedback item %s in this organisation", id)
			case Normalize(row.Query) != Normalize(r.Query):
				return errs.InvalidField("order", "item %s answers a different query", id)
			case texts[Normalize(row.Response)]:
				return errs.InvalidField("order", "two ranked answers have the same text")
			}
			texts[Normalize(row.Response)] = true
			items[i] = row
		}
		var p db.PairInsertManyParams
		for _, im := range Implied(len(items)) {
			better, worse := items[im.Better], items[im.Worse]
			prompt := []Message{{Role: export.RoleUser, Content: better.Query}}
			add(&p, Input{Prompt: prompt, Query: better.Query, Chosen: better.Response, Rejected: worse.Response,
				ContextDocuments: Documents(better.Context)}, im.Strength, better.ID.String(), worse.ID.String(), "", "", "")
		}
		p.OrgID, p.Method, p.AnnotatorID, p.AnnotationNotes, p.Tags = orgID, db.PairMethodRanking, actorUser(actor), r.Notes, tags
		created, err := q.PairInsertMany(ctx, p)
		if err != nil {
			return err
		}
		res = Result{Created: int(created), Skipped: len(p.Chosen) - int(created)}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "pair.rank", TargetType: "preference_pair",
			Details: map[string]any{"answers": len(items), "created": res.Created, "skipped": res.Skipped}})
	})
	return res, err
}

// add appends one pair to a PairInsertMany batch.
func add(p *db.PairInsertManyParams, in Input, strength float64, chosenID, rejectedID, chosenExt, rejectedExt, externalID string) {
	prompt, _ := json.Marshal(in.Prompt)
	docs := string(in.ContextDocuments)
	if docs == "" {
		docs = "[]"
	}
	p.Prompts = append(p.Prompts, string(prompt))
	p.Queries = append(p.Queries, in.Query)
	p.SystemPrompts = append(p.SystemPrompts, in.SystemPrompt)
	p.Chosen = append(p.Chosen, in.Chosen)
	p.Rejected = append(p.Rejected, in.Rejected)
	p.Strengths = append(p.Strengths, float32(strength))
	p.ContextDocuments = append(p.ContextDocuments, docs)
	p.ChosenIds = append(p.ChosenIds, chosenID)
	p.RejectedIds = append(p.RejectedIds, rejectedID)
	p.ChosenExternalIds = append(p.ChosenExternalIds, chosenExt)
	p.RejectedExternalIds = append(p.RejectedExternalIds, rejectedExt)
	p.ExternalIds = append(p.ExternalIds, externalID)
	p.ContentHashes = append(p.ContentHashes, ContentHash(in.SystemPrompt, in.Prompt, in.Chosen, in.Rejected))
}

package pairs

import (
	"context"
	"math"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
)

// GenerateMethods are the methods that make pairs from stored feedback.
var GenerateMethods = []string{"same_query", "threshold", "multi_aspect", "correction"}

// Weights weigh the four rated dimensions for multi_aspect.
type Weights struct {
	Accuracy    float64 `json:"accuracy"`
	Helpfulness float64 `json:"helpfulness"`
	Clarity     float64 `json:"clarity"`
	Safety      float64 `json:"safety"`
}

// DefaultWeights are the seed's combined score: 0.3 accuracy, 0.3
// helpfulness, 0.2 clarity, 0.2 safety.
var DefaultWeights = Weights{Accuracy: 0.3, Helpfulness: 0.3, Clarity: 0.2, Safety: 0.2}

// Defaults and bounds of the generation parameters.
const (
	DefaultMinGap         = 1.0 // rating points, same_query
	DefaultMultiAspectGap = 0.5 // weighted points, multi_aspect
	DefaultPerQuery       = 10
	MaxPerQuery           = 100
	SampleSize            = 5
)

// Generation says which pairs to make from the organisation's feedback.
type Generation struct {
	Method   string   `json:"method"`
	MinGap   *float64 `json:"min_gap,omitempty"`   // same_query and multi_aspect: the winner's least lead
	Weights  *Weights `json:"weights,omitempty"`   // multi_aspect
	PerQuery *int     `json:"per_query,omitempty"` // at most this many best and worst items per query are paired
	Tags     []string `json:"tags,omitempty"`      // put on every created pair
	DryRun   bool     `json:"dry_run,omitempty"`
	// AgreedOnly leaves out feedback whose overlapping review is open or
	// disputed. Nil: on when the organisation asks for overlapping review.
	AgreedOnly *bool `json:"agreed_only,omitempty"`
}

// Validate checks the parameters and fills in the defaults.
func (g *Generation) Validate() error {
	v := &errs.Invalid{}
	if !oneOf(g.Method, GenerateMethods) {
		v.Add("method", "must be one of %s", strings.Join(GenerateMethods, ", "))
	}
	if g.MinGap == nil {
		gap := DefaultMinGap
		if g.Method == "multi_aspect" {
			gap = DefaultMultiAspectGap
		}
		g.MinGap = &gap
	} else if gap := *g.MinGap; math.IsNaN(gap) || gap <= 0 || gap > 4 {
		v.Add("min_gap", "must be above 0 and at most 4 (scores run from 1 to 5)")
	}
	if g.Weights == nil {
		w := DefaultWeights
		g.Weights = &w
	} else {
		w := g.Weights
		for _, d := range []struct {
			name string
			x    float64
		}{{"accuracy", w.Accuracy}, {"helpfulness", w.Helpfulness}, {"clarity", w.Clarity}, {"safety", w.Safety}} {
			if math.IsNaN(d.x) || d.x < 0 || d.x > 1 {
				v.Add("weights."+d.name, "must be from 0 to 1")
			}
		}
		if w.Accuracy+w.Helpfulness+w.Clarity+w.Safety <= 0 {
			v.Add("weights", "at least one weight must be above 0")
		}
	}
	if g.PerQuery == nil {
		n := DefaultPerQuery
		g.PerQuery = &n
	} else if *g.PerQuery < 1 || *g.PerQuery > MaxPerQuery {
		v.Add("per_query", "must be 1 to %d", MaxPerQuery)
	}
	tags, msg := feedback.NormalizeTags(g.Tags)
	if msg != "" {
		v.Add("tags", "%s", msg)
	}
	g.Tags = tags
	return v.Err()
}

// Sample is one pair a generation would create.
type Sample struct {
	Query              string    `json:"query"`
	Chosen             string    `json:"chosen_response"`
	Rejected           string    `json:"rejected_response"`
	Strength           float64   `json:"preference_strength"`
	ChosenFeedbackID   uuid.UUID `json:"chosen_feedback_id"`
	RejectedFeedbackID uuid.UUID `json:"rejected_feedback_id"`
}

// Preview is what a generation would do, computed without storing anything.
type Preview struct {
	Method     string   `json:"method"`
	Candidates int      `json:"candidates"` // distinct pairs found
	Existing   int      `json:"existing"`   // of those, already stored
	New        int      `json:"new"`        // would be created
	Samples    []Sample `json:"samples"`    // some of the new ones, strongest first
	AgreedOnly bool     `json:"agreed_only"`
	LeftOut    int      `json:"left_out"` // with agreed_only: pairs of feedback under open or disputed review
}

// Result is what a generation, a ranking or an import stored.
type Result struct {
	Created int `json:"created"`
	Skipped int `json:"skipped"` // identical to a stored pair
	// LeftOut: pairs of feedback whose overlapping review is open or
	// disputed, when only agreed items are taken.
	LeftOut int `json:"left_out,omitempty"`
}

// Preview counts the pairs a generation finds and shows a few new ones.
func (s *Service) Preview(ctx context.Context, orgID uuid.UUID, g Generation) (Preview, error) {
	if err := g.Validate(); err != nil {
		return Preview{}, err
	}
	q := db.New(s.Pool)
	if err := g.agreedOnly(ctx, q, orgID); err != nil {
		return Preview{}, err
	}
	c := g.counts(orgID)
	n, err := q.PairCountCandidates(ctx, c)
	if err != nil {
		return Preview{}, err
	}
	rows, err := q.PairListCandidateSample(ctx, db.PairListCandidateSampleParams{OrgID: c.OrgID, Method: c.Method, MinGap: c.MinGap,
		WAccuracy: c.WAccuracy, WHelpfulness: c.WHelpfulness, WClarity: c.WClarity, WSafety: c.WSafety, PerQuery: c.PerQuery,
		RowLimit: SampleSize, AgreedOnly: c.AgreedOnly})
	if err != nil {
		return Preview{}, err
	}
	p := Preview{Method: g.Method, Candidates: int(n.Candidates), Existing: int(n.Existing), New: int(n.Candidates - n.Existing),
		Samples: make([]Sample, len(rows)), AgreedOnly: c.AgreedOnly, LeftOut: int(n.LeftOut)}
	for i, r := range rows {
		p.Samples[i] = Sample{Query: r.Query, Chosen: r.Chosen, Rejected: r.Rejected, Strength: Strength(r.Strength),
			ChosenFeedbackID: r.ChosenFeedbackID, RejectedFeedbackID: r.RejectedFeedbackID}
	}
	return p, nil
}

// Generate stores every pair the generation finds in one set-based
// statement, leaving out those already stored, and records it in the audit
// log.
func (s *Service) Generate(ctx context.Context, actor audit.Actor, orgID uuid.UUID, g Generation) (Result, error) {
	if err := g.Validate(); err != nil {
		return Result{}, err
	}
	var res Result
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if err := g.agreedOnly(ctx, q, orgID); err != nil {
			return err
		}
		c := g.counts(orgID)
		if c.AgreedOnly {
			n, err := q.PairCountCandidates(ctx, c)
			if err != nil {
				return err
			}
			res.LeftOut = int(n.LeftOut)
		}
		n, err := q.PairInsertGenerated(ctx, db.PairInsertGeneratedParams{OrgID: orgID, Method: c.Method, AnnotatorID: actorUser(actor),
			Tags: g.Tags, MinGap: c.MinGap, WAccuracy: c.WAccuracy, WHelpfulness: c.WHelpfulness, WClarity: c.WClarity,
			WSafety: c.WSafety, PerQuery: c.PerQuery, AgreedOnly: c.AgreedOnly})
		if err != nil {
			return err
		}
		res.Created, res.Skipped = int(n.Created), int(n.Candidates-n.Created)
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "pair.generate", TargetType: "preference_pair",
			Details: map[string]any{"method": g.Method, "min_gap": *g.MinGap, "weights": g.Weights, "per_query": *g.PerQuery,
				"created": res.Created, "skipped": res.Skipped, "agreed_only": *g.AgreedOnly, "left_out": res.LeftOut}})
	})
	return res, err
}

// agreedOnly settles whether only agreed items are taken: as asked, or
// else while the organisation asks for overlapping review.
func (g *Generation) agreedOnly(ctx context.Context, q *db.Queries, orgID uuid.UUID) error {
	if g.AgreedOnly != nil {
		return nil
	}
	n, err := q.ReviewPlanCountActive(ctx, orgID)
	on := n > 0
	g.AgreedOnly = &on
	return err
}

func (g Generation) counts(orgID uuid.UUID) db.PairCountCandidatesParams {
	return db.PairCountCandidatesParams{AgreedOnly: g.AgreedOnly != nil && *g.AgreedOnly, OrgID: orgID, Method: db.PairMethod(g.Method), MinGap: float32(*g.MinGap),
		WAccuracy: float32(g.Weights.Accuracy), WHelpfulness: float32(g.Weights.Helpfulness), WClarity: float32(g.Weights.Clarity),
		WSafety: float32(g.Weights.Safety), PerQuery: int32(*g.PerQuery)}
}

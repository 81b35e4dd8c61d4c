// Package hygiene keeps feedback that looks like spam, bots or one user's
// flood out of training data (seed 001: "remove spam/bot feedback, filter
// extreme outliers" before aggregating a training set). Each rule is one
// set-based statement that flags the items it finds; an item's
// is_training_data is false while it carries a flag, unless a person
// decided otherwise, and datasets and pair generation leave out what is
// not training data.
//
// The rules look at what is stored, not at the clock of a request: items
// a batch or an import stored together share one instant, so the timing
// rules count requests, never the items of one batch apart.
package hygiene

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
)

// The flags, one per rule.
const (
	// RateOutlier: an end user who sent far more than the day's other
	// users (Rules.RateMinItems, Rules.RateFactor times the median).
	RateOutlier = "rate_outlier"
	// DuplicateSpam: a comment pasted on several items, exactly.
	DuplicateSpam = "duplicate_spam"
	// NearDuplicateSpam: the same comment with digits, punctuation or
	// spacing changed ("Great!! #1", "great 2").
	NearDuplicateSpam = "near_duplicate_spam"
	// BotSession: a session whose requests come faster than a person
	// reads and rates answers.
	BotSession = "bot_session"
)

// Flags lists every flag in the order pages show them.
var Flags = []string{RateOutlier, DuplicateSpam, NearDuplicateSpam, BotSession}

// Rules are the thresholds of the rules.
type Rules struct {
	// RateMinItems and RateFactor: a user is an outlier on a day with
	// more than RateMinItems items and more than RateFactor times the
	// median user's count that day.
	RateMinItems int
	RateFactor   float64
	// MinRepeats: a comment of 20 characters or more on this many items
	// is spam.
	MinRepeats int
	// BotMinRequests and BotMaxMedianGap: a session with this many
	// requests or more whose median time between them is under the gap.
	BotMinRequests  int
	BotMaxMedianGap time.Duration
}

// DefaultRules are the thresholds Curate uses.
var DefaultRules = Rules{RateMinItems: 50, RateFactor: 10, MinRepeats: 3, BotMinRequests: 5, BotMaxMedianGap: 2 * time.Second}

// Service flags items and records people's decisions.
type Service struct {
	Pool *pgxpool.Pool
	// Rules are the thresholds; zero uses DefaultRules.
	Rules Rules
}

// New builds data hygiene on pool's database, with the default rules.
func New(pool *pgxpool.Pool) *Service { return &Service{Pool: pool} }

func (s *Service) rules() Rules {
	if s.Rules == (Rules{}) {
		return DefaultRules
	}
	return s.Rules
}

// Report is how many items each rule flagged in one check.
type Report struct {
	RateOutlier       int64 `json:"rate_outlier"`
	DuplicateSpam     int64 `json:"duplicate_spam"`
	NearDuplicateSpam int64 `json:"near_duplicate_spam"`
	BotSession        int64 `json:"bot_session"`
}

// Total is every flag the check added.
func (r Report) Total() int64 {
	return r.RateOutlier + r.DuplicateSpam + r.NearDuplicateSpam + r.BotSession
}

// Check applies every rule to the organisation's items created since
// (with the earlier items they are compared to), in one transaction.
func (s *Service) Check(ctx context.Context, orgID uuid.UUID, since time.Time) (Report, error) {
	r := s.rules()
	var rep Report
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		// Each rule reads a bounded part of feedback by its index (the
		// window since, a session's or a comment's rows); misestimated,
		// the planner read every partition whole instead.
		if err := q.PlannerUpdateIndexOnly(ctx); err != nil {
			return err
		}
		var err error
		if rep.RateOutlier, err = q.HygieneUpdateRateOutliers(ctx, db.HygieneUpdateRateOutliersParams{OrgID: orgID, Since: since,
			MinItems: int32(r.RateMinItems), Factor: r.RateFactor}); err != nil {
			return fmt.Errorf("rate outliers: %w", err)
		}
		if rep.DuplicateSpam, err = q.HygieneUpdateDuplicateComments(ctx, db.HygieneUpdateDuplicateCommentsParams{OrgID: orgID, Since: since,
			MinRepeats: int32(r.MinRepeats)}); err != nil {
			return fmt.Errorf("duplicate comments: %w", err)
		}
		if rep.NearDuplicateSpam, err = q.HygieneUpdateNearDuplicateComments(ctx, db.HygieneUpdateNearDuplicateCommentsParams{OrgID: orgID,
			Since: since, MinRepeats: int32(r.MinRepeats)}); err != nil {
			return fmt.Errorf("near-duplicate comments: %w", err)
		}
		if rep.BotSession, err = q.HygieneUpdateBotSessions(ctx, db.HygieneUpdateBotSessionsParams{OrgID: orgID, Since: since,
			MinRequests: int32(r.BotMinRequests), MaxMedianGap: r.BotMaxMedianGap.Seconds()}); err != nil {
			return fmt.Errorf("bot sessions: %w", err)
		}
		return nil
	})
	return rep, err
}

// CheckEvery is how often every organisation's new items are checked,
// and CheckWindow how far back each periodic check looks: a day, so that
// a user's count covers the whole of the day it falls in.
const (
	CheckEvery  = 10 * time.Minute
	CheckWindow = 24 * time.Hour
)

// CheckAll checks every organisation's items of the last CheckWindow.
func (s *Service) CheckAll(ctx context.Context, now time.Time) error {
	orgs, err := db.New(s.Pool).HygieneListOrgIDs(ctx)
	if err != nil {
		return err
	}
	for _, org := range orgs {
		if _, err := s.Check(ctx, org, now.Add(-CheckWindow)); err != nil {
			return fmt.Errorf("organisation %s: %w", org, err)
		}
	}
	return nil
}

// State is whether an item may be training data and why.
type State struct {
	ID             uuid.UUID `json:"id"`
	IsTrainingData bool      `json:"is_training_data"`
	HygieneFlags   []string  `json:"hygiene_flags"`
	// DecidedBy names the person whose decision holds; "" when the flags
	// decide.
	DecidedBy string `json:"decided_by"`
	Version   int32  `json:"version"`
}

// Decide records a person's decision on whether an item may be training
// data; nil withdraws it, and the flags decide again. Audited.
func (s *Service) Decide(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID, use *bool) (State, error) {
	var st State
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if use == nil {
			r, err := q.HygieneUpdateUndecided(ctx, db.HygieneUpdateUndecidedParams{OrgID: orgID, ID: id})
			if err != nil {
				return notFound(err)
			}
			st = State{ID: r.ID, IsTrainingData: r.IsTrainingData, HygieneFlags: r.HygieneFlags, DecidedBy: r.TrainingSetBy, Version: r.Version}
		} else {
			r, err := q.HygieneUpdateTrainingData(ctx, db.HygieneUpdateTrainingDataParams{OrgID: orgID, ID: id, IsTrainingData: *use,
				SetBy: actor.Label})
			if err != nil {
				return notFound(err)
			}
			st = State{ID: r.ID, IsTrainingData: r.IsTrainingData, HygieneFlags: r.HygieneFlags, DecidedBy: r.TrainingSetBy, Version: r.Version}
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "feedback.training_data", TargetType: "feedback",
			TargetID: id.String(), Details: map[string]any{"is_training_data": st.IsTrainingData, "decided": use != nil}})
	})
	return st, err
}

// Label is a flag in words.
func Label(flag string) string {
	switch flag {
	case RateOutlier:
		return "its user sent far more than other users that day"
	case DuplicateSpam:
		return "its comment is pasted on other items"
	case NearDuplicateSpam:
		return "its comment repeats others with small changes"
	case BotSession:
		return "its session sends faster than a person reads"
	}
	return flag
}

// Why says why an item is not training data.
func Why(flags []string, decidedBy string) string {
	if decidedBy != "" {
		return decidedBy + " excluded it from training"
	}
	if len(flags) == 0 {
		return "it is excluded from training"
	}
	words := make([]string, len(flags))
	for i, f := range flags {
		words[i] = Label(f)
	}
	return strings.Join(words, "; ")
}

func notFound(err error) error {
	return errs.NotFound(err)
}

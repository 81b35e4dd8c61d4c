package alerts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
)

func fromRow(r db.AlertSetting) Settings {
	return Settings{Enabled: r.Enabled, RatingThreshold: r.RatingThreshold, MinRatings: int(r.MinRatings),
		Window: time.Duration(r.WindowHours) * time.Hour, BaselineDays: int(r.BaselineDays),
		SpikeFactor: r.SpikeFactor, SpikeMinCount: int(r.SpikeMinCount), WebhookURL: r.WebhookUrl}
}

// read takes the snapshot the rules need for the window ending at now.
func read(ctx context.Context, q *db.Queries, orgID uuid.UUID, s Settings, now time.Time) (Snapshot, error) {
	since := now.Add(-s.Window)
	snap := Snapshot{Since: since, Until: now}
	ratings, err := q.AlertListRatingsByVersion(ctx, db.AlertListRatingsByVersionParams{OrgID: orgID, Since: since, Until: now})
	if err != nil {
		return snap, err
	}
	for _, r := range ratings {
		m := ModelRatings{Model: r.Label, Models: r.Models, Count: int(r.Ratings), Sum: int(r.RatingSum)}
		if r.VersionID != uuid.Nil {
			m.VersionID = r.VersionID.String()
		}
		snap.Ratings = append(snap.Ratings, m)
	}
	td, err := q.AlertCountThumbsDown(ctx, db.AlertCountThumbsDownParams{OrgID: orgID, WindowStart: since,
		BaselineStart: since.Add(-time.Duration(s.BaselineDays) * 24 * time.Hour), Until: now})
	if err != nil {
		return snap, err
	}
	snap.ThumbsDown, snap.BaselineThumbsDown, snap.BaselineFeedback = int(td.InWindow), int(td.InBaseline), int(td.BaselineFeedback)
	safety, err := q.AlertCountSafetyReports(ctx, db.AlertCountSafetyReportsParams{OrgID: orgID, Since: since, Until: now})
	if err != nil {
		return snap, err
	}
	snap.SafetyReports = int(safety.Reports)
	return snap, nil
}

// Result says what one evaluation changed.
type Result struct {
	Opened   []db.Alert
	Resolved int
}

// EvaluateAll evaluates every organisation at now, each on its own, so one
// failing does not hold back the others. It returns what changed in each
// organisation that was evaluated, and every failure joined.
func (s *Service) EvaluateAll(ctx context.Context, now time.Time) (map[uuid.UUID]Result, error) {
	orgs, err := db.New(s.Pool).AlertListOrgIDs(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]Result, len(orgs))
	var failed []error
	for _, org := range orgs {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		res, err := s.Evaluate(ctx, org, now)
		if err != nil {
			failed = append(failed, fmt.Errorf("organisation %s: %w", org, err))
			continue
		}
		out[org] = res
	}
	return out, errors.Join(failed...)
}

// Evaluate evaluates one organisation at now: opens alerts for new
// conditions, refreshes the ones that still hold and resolves the ones that
// cleared, in one transaction, which also queues a webhook delivery for
// each alert it opens, so a delivery exists exactly when its alert does.
func (s *Service) Evaluate(ctx context.Context, orgID uuid.UUID, now time.Time) (Result, error) {
	var res Result
	err := db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		res = Result{}
		// The windows' counts read feedback by (org_id, created_at), never
		// a month's partition whole.
		if err := q.PlannerUpdateIndexOnly(ctx); err != nil {
			return err
		}
		settings, _, err := s.load(ctx, q, orgID)
		if err != nil {
			return err
		}
		snap, err := read(ctx, q, orgID, settings, now)
		if err != nil {
			return err
		}
		open, err := q.AlertListOpen(ctx, orgID)
		if err != nil {
			return err
		}
		byKey := make(map[string]db.Alert, len(open))
		keys := make([]string, len(open))
		for i, a := range open {
			byKey[a.DedupKey], keys[i] = a, a.DedupKey
		}
		holding := Evaluate(settings, snap)
		if s.Monitors != nil {
			more, err := s.Monitors.ConditionsTx(ctx, tx, orgID, now)
			if err != nil {
				return err
			}
			holding = append(holding, more...)
		}
		toOpen, toRefresh, toResolve := Plan(keys, holding)
		for _, c := range toOpen {
			details, err := json.Marshal(c.Details)
			if err != nil {
				return err
			}
			a, err := q.AlertInsert(ctx, db.AlertInsertParams{OrgID: orgID, Kind: c.Kind, Severity: c.Severity, DedupKey: c.Key,
				Title: c.Title, Message: c.Message, Details: details, Now: now})
			if err != nil {
				return fmt.Errorf("opening alert %s: %w", c.Key, err)
			}
			if s.Jobs != nil {
				if _, err := s.Jobs.InsertTx(ctx, tx, WebhookArgs{OrgID: a.OrgID, AlertID: a.ID}, nil); err != nil {
					return err
				}
			}
			res.Opened = append(res.Opened, a)
		}
		for _, c := range toRefresh {
			details, err := json.Marshal(c.Details)
			if err != nil {
				return err
			}
			if err := q.AlertUpdateSeen(ctx, db.AlertUpdateSeenParams{OrgID: orgID, ID: byKey[c.Key].ID, Severity: c.Severity,
				Title: c.Title, Message: c.Message, Details: details, Now: now}); err != nil {
				return err
			}
		}
		for _, k := range toResolve {
			if err := q.AlertUpdateResolved(ctx, db.AlertUpdateResolvedParams{OrgID: orgID, ID: byKey[k].ID, Now: now}); err != nil {
				return err
			}
			res.Resolved++
		}
		return nil
	})
	return res, err
}

// Evidence is the page an alert's details link to as its evidence (the
// production monitors' page of its version), "" when they link none. Only
// a path on this site is taken.
func Evidence(details []byte) string {
	var d struct {
		Evidence string `json:"evidence"`
	}
	if json.Unmarshal(details, &d) != nil || !strings.HasPrefix(d.Evidence, "/") || strings.HasPrefix(d.Evidence, "//") {
		return ""
	}
	return d.Evidence
}

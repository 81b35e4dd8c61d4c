package alerts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
)

// Load returns an organisation's settings, the defaults when it has none.
func Load(ctx context.Context, q *db.Queries, orgID uuid.UUID) (Settings, db.AlertSetting, error) {
	row, err := q.AlertSettingsGet(ctx, orgID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Defaults(), db.AlertSetting{OrgID: orgID}, nil
	}
	if err != nil {
		return Settings{}, row, err
	}
	return FromRow(row), row, nil
}

// FromRow turns a stored settings row into Settings.
func FromRow(r db.AlertSetting) Settings {
	return Settings{Enabled: r.Enabled, RatingThreshold: r.RatingThreshold, MinRatings: int(r.MinRatings),
		Window: time.Duration(r.WindowHours) * time.Hour, BaselineDays: int(r.BaselineDays),
		SpikeFactor: r.SpikeFactor, SpikeMinCount: int(r.SpikeMinCount), WebhookURL: r.WebhookUrl}
}

// Save validates and stores an organisation's settings (not the secret).
func Save(ctx context.Context, q *db.Queries, orgID uuid.UUID, s Settings) (db.AlertSetting, error) {
	if err := s.Validate(); err != nil {
		return db.AlertSetting{}, err
	}
	return q.AlertSettingsUpsert(ctx, db.AlertSettingsUpsertParams{
		OrgID: orgID, Enabled: s.Enabled, RatingThreshold: s.RatingThreshold, MinRatings: int32(s.MinRatings),
		WindowHours: int32(s.Window / time.Hour), BaselineDays: int32(s.BaselineDays), SpikeFactor: s.SpikeFactor,
		SpikeMinCount: int32(s.SpikeMinCount), WebhookUrl: s.WebhookURL,
	})
}

// Read takes the snapshot the rules need for the window ending at now.
func Read(ctx context.Context, q *db.Queries, orgID uuid.UUID, s Settings, now time.Time) (Snapshot, error) {
	since := now.Add(-s.Window)
	var snap Snapshot
	ratings, err := q.AlertRatingsByModel(ctx, db.AlertRatingsByModelParams{OrgID: orgID, Since: since, Until: now})
	if err != nil {
		return snap, err
	}
	for _, r := range ratings {
		snap.Ratings = append(snap.Ratings, ModelRatings{Model: r.Model, Count: int(r.Ratings), Sum: int(r.RatingSum)})
	}
	td, err := q.AlertThumbsDown(ctx, db.AlertThumbsDownParams{OrgID: orgID, WindowStart: since,
		BaselineStart: since.Add(-time.Duration(s.BaselineDays) * 24 * time.Hour), Until: now})
	if err != nil {
		return snap, err
	}
	snap.ThumbsDown, snap.BaselineThumbsDown, snap.BaselineFeedback = int(td.InWindow), int(td.InBaseline), int(td.BaselineFeedback)
	safety, err := q.AlertSafetyReports(ctx, db.AlertSafetyReportsParams{OrgID: orgID, Since: since, Until: now})
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

// Evaluator runs the rules against the database.
type Evaluator struct {
	Pool *pgxpool.Pool
}

// OnOpen is called inside the evaluation's transaction for each alert it
// opens, so that work queued for the alert (a webhook delivery) commits with it.
type OnOpen func(ctx context.Context, tx pgx.Tx, a db.Alert) error

// EvaluateOrg evaluates one organisation at now: opens alerts for new
// conditions, refreshes the ones that still hold and resolves the ones that
// cleared, in one transaction.
func (e *Evaluator) EvaluateOrg(ctx context.Context, orgID uuid.UUID, now time.Time, onOpen OnOpen) (Result, error) {
	var res Result
	err := db.InTx(ctx, e.Pool, func(tx pgx.Tx, q *db.Queries) error {
		res = Result{}
		s, _, err := Load(ctx, q, orgID)
		if err != nil {
			return err
		}
		snap, err := Read(ctx, q, orgID, s, now)
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
		toOpen, toRefresh, toResolve := Plan(keys, Evaluate(s, snap))
		for _, c := range toOpen {
			details, err := json.Marshal(c.Details)
			if err != nil {
				return err
			}
			a, err := q.AlertOpen(ctx, db.AlertOpenParams{OrgID: orgID, Kind: c.Kind, Severity: c.Severity, DedupKey: c.Key,
				Title: c.Title, Message: c.Message, Details: details, Now: now})
			if err != nil {
				return fmt.Errorf("opening alert %s: %w", c.Key, err)
			}
			if onOpen != nil {
				if err := onOpen(ctx, tx, a); err != nil {
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
			if err := q.AlertRefresh(ctx, db.AlertRefreshParams{OrgID: orgID, ID: byKey[c.Key].ID, Severity: c.Severity,
				Title: c.Title, Message: c.Message, Details: details, Now: now}); err != nil {
				return err
			}
		}
		for _, k := range toResolve {
			if err := q.AlertResolve(ctx, db.AlertResolveParams{OrgID: orgID, ID: byKey[k].ID, Now: now}); err != nil {
				return err
			}
			res.Resolved++
		}
		return nil
	})
	return res, err
}

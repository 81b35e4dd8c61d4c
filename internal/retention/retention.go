// Package retention keeps feedback's month partitions (migration 00140)
// and removes the feedback an organisation keeps for a limited time
// (organizations.retention_days, migration 00141) once it is older.
//
// Removal goes month by month, each month in its own transaction with its
// audit record ("feedback.retention_removed", the month and the count):
// the feedback's keys first, whose delete cascades to what references the
// feedback (reviews, live scores, dataset memberships, codebook uses; a
// preference pair keeps its own text and loses its link), then the rows.
// A dataset version's items are copies made at its freeze, so a frozen
// version's content and hash stay as they were. The organisation's
// experiment exposures first seen before the same horizon go too, in one
// transaction with one audit record per month of their phase
// ("exposure.retention_removed"), and the experiments' kept per-unit
// values follow. A month's partition of feedback, live scores or
// exposures left empty once every organisation's rows are gone is
// dropped.
package retention

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
)

// Ahead is how many months after this one have their partitions made in
// advance.
const Ahead = 2

// MaxDays is the longest retention an organisation may set (100 years).
const MaxDays = 36500

// Service removes expired feedback and keeps the partitions.
type Service struct {
	Pool *pgxpool.Pool
}

// New builds the service.
func New(pool *pgxpool.Pool) *Service { return &Service{Pool: pool} }

// Removed is one month of one organisation's feedback (or exposures)
// removed.
type Removed struct {
	OrgID uuid.UUID
	Month string // YYYY-MM, UTC
	Rows  int64
}

// Report is what one run did.
type Report struct {
	Removed []Removed
	// Exposures are the experiment exposures removed, by month of their
	// phase's start.
	Exposures  []Removed
	Partitions []db.PartitionListMaintainedRow
}

// monthStart is the first instant (UTC) of t's month.
func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// Run removes every organisation's feedback older than its retention at
// now, then creates the coming months' partitions, splits history out of
// the DEFAULT partitions and drops the emptied months before this one.
func (s *Service) Run(ctx context.Context, now time.Time) (Report, error) {
	var rep Report
	q := db.New(s.Pool)
	orgs, err := q.OrgListRetention(ctx)
	if err != nil {
		return rep, err
	}
	var errAll error
	for _, o := range orgs {
		horizon := now.Add(-time.Duration(o.RetentionDays) * 24 * time.Hour)
		removed, err := s.expire(ctx, o.ID, horizon)
		rep.Removed = append(rep.Removed, removed...)
		errAll = errors.Join(errAll, err)
		exposures, err := s.expireExposures(ctx, o.ID, horizon)
		rep.Exposures = append(rep.Exposures, exposures...)
		errAll = errors.Join(errAll, err)
	}
	var emptied []time.Time
	for _, removed := range [][]Removed{rep.Removed, rep.Exposures} {
		for _, r := range removed {
			if m, err := time.Parse("2006-01", r.Month); err == nil {
				emptied = append(emptied, m)
			}
		}
	}
	parts, err := q.PartitionListMaintained(ctx, db.PartitionListMaintainedParams{Ahead: Ahead, EmptyBefore: monthStart(now), Emptied: emptied})
	rep.Partitions = parts
	return rep, errors.Join(errAll, err)
}

// expire removes the organisation's feedback given before horizon, one
// month per transaction, oldest first.
func (s *Service) expire(ctx context.Context, orgID uuid.UUID, horizon time.Time) ([]Removed, error) {
	oldest, err := db.New(s.Pool).FeedbackGetOldest(ctx, orgID)
	if err != nil || !oldest.Before(horizon) {
		return nil, err
	}
	var out []Removed
	for from := monthStart(oldest); from.Before(horizon); from = from.AddDate(0, 1, 0) {
		to := from.AddDate(0, 1, 0)
		if to.After(horizon) {
			to = horizon
		}
		var n int64
		err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
			p := db.FeedbackDeleteRangeParams{OrgID: orgID, FromAt: from, ToAt: to}
			if _, err := q.FeedbackKeyDeleteRange(ctx, db.FeedbackKeyDeleteRangeParams(p)); err != nil {
				return err
			}
			var err error
			if n, err = q.FeedbackDeleteRange(ctx, p); err != nil || n == 0 {
				return err
			}
			return audit.Record(ctx, q, audit.System, audit.Entry{
				OrgID: orgID, Action: "feedback.retention_removed", TargetType: "feedback", TargetID: from.Format("2006-01"),
				Details: map[string]any{"month": from.Format("2006-01"), "rows": n, "before": to.Format(time.RFC3339)},
			})
		})
		if err != nil {
			return out, fmt.Errorf("retention of %s, %s: %w", orgID, from.Format("2006-01"), err)
		}
		if n > 0 {
			out = append(out, Removed{OrgID: orgID, Month: from.Format("2006-01"), Rows: n})
		}
	}
	return out, nil
}

// expireExposures removes the organisation's experiment exposures first
// seen before horizon, with an audit record per month of their phase.
func (s *Service) expireExposures(ctx context.Context, orgID uuid.UUID, horizon time.Time) ([]Removed, error) {
	var out []Removed
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		out = nil
		months, err := q.ExposureDeleteExpired(ctx, db.ExposureDeleteExpiredParams{OrgID: orgID, BeforeAt: horizon})
		if err != nil {
			return err
		}
		for _, m := range months {
			if err := audit.Record(ctx, q, audit.System, audit.Entry{
				OrgID: orgID, Action: "exposure.retention_removed", TargetType: "experiment_exposures", TargetID: m.Month,
				Details: map[string]any{"month": m.Month, "rows": m.Rows, "before": horizon.Format(time.RFC3339)},
			}); err != nil {
				return err
			}
			out = append(out, Removed{OrgID: orgID, Month: m.Month, Rows: m.Rows})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("retention of %s's exposures: %w", orgID, err)
	}
	return out, nil
}

// SetDays sets how many days the organisation keeps its feedback; nil
// keeps it forever. The change is audited.
func (s *Service) SetDays(ctx context.Context, actor audit.Actor, orgID uuid.UUID, days *int) error {
	v := pgtype.Int4{}
	if days != nil {
		if *days < 1 || *days > MaxDays {
			return errs.InvalidField("retention_days", "between 1 and %d days, or none to keep feedback forever", MaxDays)
		}
		v = pgtype.Int4{Int32: int32(*days), Valid: true}
	}
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if err := q.OrgUpdateRetention(ctx, db.OrgUpdateRetentionParams{ID: orgID, RetentionDays: v}); err != nil {
			return err
		}
		details := map[string]any{"retention_days": nil}
		if days != nil {
			details["retention_days"] = *days
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "org.retention_set", TargetType: "organization",
			TargetID: orgID.String(), Details: details})
	})
}

// Days is how many days the organisation keeps its feedback; nil keeps it
// forever.
func (s *Service) Days(ctx context.Context, orgID uuid.UUID) (*int, error) {
	o, err := db.New(s.Pool).OrgGet(ctx, orgID)
	if err != nil {
		return nil, errs.NotFound(err)
	}
	if !o.RetentionDays.Valid {
		return nil, nil
	}
	d := int(o.RetentionDays.Int32)
	return &d, nil
}

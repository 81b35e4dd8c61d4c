package experiments

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/stats"
)

// What an experiment that is not running recommends: its state speaks
// before its numbers, so a rolled-back, paused or ended experiment never
// reads "Keep running" or "Stop now". A running one recommends what the
// statistics engine says (stats.DeployTreatment and the others).
const (
	ActionStart      = "start"       // a draft: nothing is assigned yet
	ActionRolledBack = "rolled_back" // the rollout sent all traffic back to the control and paused
	ActionPaused     = "paused"      // paused by a person
	ActionEnded      = "ended"       // completed, with its winner
	ActionCancelled  = "cancelled"
)

// Decision is the last move that stopped an experiment: who made it (a
// person's label, or "rollout" for the automatic rollout), when, the
// winner of an ended one and the reason given.
type Decision struct {
	Status string    `json:"status"`
	Winner string    `json:"winner,omitempty"`
	By     string    `json:"by"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
}

// verdict puts the experiment's state before the statistics' advice:
// numbers is what the engine recommends from the data alone.
func verdict(ctx context.Context, q *db.Queries, e db.Experiment, numbers stats.Recommendation) (stats.Recommendation, *Decision, error) {
	status := string(e.Status)
	if status == Running {
		return numbers, nil, nil
	}
	if status == Draft {
		return stats.Recommendation{Action: ActionStart, Reason: "The experiment has not started: no unit is assigned until it is started."}, nil, nil
	}
	d := &Decision{Status: status, Winner: e.Winner, Reason: e.StopReason}
	entry, err := q.AuditGetLatest(ctx, db.AuditGetLatestParams{OrgID: e.OrgID, Action: "experiment." + status, TargetType: "experiment",
		TargetID: e.ID.String()})
	switch {
	case err == nil:
		d.By, d.At = entry.ActorLabel, entry.CreatedAt
		if entry.ActorKind == rolloutActor.Kind && entry.ActorLabel == rolloutActor.Label && status == Paused {
			return stats.Recommendation{Action: ActionRolledBack, Reason: sentence(e.StopReason,
				"All traffic went back to the control and the experiment was paused.")}, d, nil
		}
	case !errors.Is(err, pgx.ErrNoRows):
		return numbers, nil, err
	}
	switch status {
	case Paused:
		return stats.Recommendation{Action: ActionPaused, Reason: sentence(e.StopReason,
			"No unit is assigned while it is paused. So far: "+numbers.Reason)}, d, nil
	case Completed:
		won := map[string]string{"control": "The control won.", "treatment": "The treatment won.",
			"inconclusive": "It ended without a winner."}[e.Winner]
		return stats.Recommendation{Action: ActionEnded, Reason: sentence(won, e.StopReason)}, d, nil
	}
	return stats.Recommendation{Action: ActionCancelled, Reason: sentence("The experiment was cancelled: no unit is assigned.", e.StopReason)}, d, nil
}

// sentence joins non-empty sentences with a space.
func sentence(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, " ")
}

// Package audit records who did what to which target.
package audit

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
)

// Actor is whoever caused an action.
type Actor struct {
	Kind  string // user, api_key, system or anonymous
	ID    uuid.UUID
	Label string // e-mail of a user, name of a key
	IP    string
}

// System is the actor for work nobody asked for directly (seeding, periodic jobs).
var System = Actor{Kind: "system", Label: "system"}

// LastWriteWins is the details key, set to true, of a change made without
// the version its author read (an API PATCH without If-Match): it applied
// over whatever was stored then.
const LastWriteWins = "last_write_wins"

// Unconditional marks details as those of a change made without a
// version when version is 0, and returns them.
func Unconditional(details map[string]any, version int32) map[string]any {
	if version == 0 {
		details[LastWriteWins] = true
	}
	return details
}

// Entry is one audited action.
type Entry struct {
	OrgID      uuid.UUID
	Action     string // dotted, e.g. "user.create", "auth.login_failed"
	TargetType string
	TargetID   string
	Details    map[string]any
}

// Record writes an entry. Call it with the transaction that made the change,
// so the change and its record commit together.
func Record(ctx context.Context, q *db.Queries, actor Actor, e Entry) error {
	details := []byte("{}")
	if len(e.Details) > 0 {
		var err error
		if details, err = json.Marshal(e.Details); err != nil {
			return err
		}
	}
	org := uuid.NullUUID{UUID: e.OrgID, Valid: e.OrgID != uuid.Nil}
	actorID := uuid.NullUUID{UUID: actor.ID, Valid: actor.ID != uuid.Nil}
	return q.AuditInsert(ctx, db.AuditInsertParams{
		OrgID: org, ActorKind: actor.Kind, ActorID: actorID, ActorLabel: actor.Label,
		Action: e.Action, TargetType: e.TargetType, TargetID: e.TargetID, Details: details, Ip: actor.IP,
	})
}

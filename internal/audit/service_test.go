package audit_test

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/keyset"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The log pages newest first with the keyset cursor, filters by actor and
// action, and shows only the organisation's own entries.
func TestList(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	q := db.New(pool)
	var org, other uuid.UUID
	if err := pool.QueryRow(ctx, "INSERT INTO organizations (slug, name) VALUES ('acme', 'Acme') RETURNING id").Scan(&org); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, "INSERT INTO organizations (slug, name) VALUES ('globex', 'Globex') RETURNING id").Scan(&other); err != nil {
		t.Fatal(err)
	}
	ada := audit.Actor{Kind: "user", ID: uuid.New(), Label: "ada@acme.test"}
	cora := audit.Actor{Kind: "user", ID: uuid.New(), Label: "cora@acme.test"}
	// Entries 1 to 5, in this order: ada creates, cora dismisses, ada
	// creates, cora dismisses, ada revokes; globex has one of its own.
	for i, e := range []struct {
		who    audit.Actor
		action string
	}{{ada, "user.create"}, {cora, "alert.dismiss"}, {ada, "user.create"}, {cora, "alert.dismiss"}, {ada, "api_key.revoke"}} {
		if err := audit.Record(ctx, q, e.who, audit.Entry{OrgID: org, Action: e.action, TargetID: strconv.Itoa(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := audit.Record(ctx, q, audit.System, audit.Entry{OrgID: other, Action: "user.create", TargetID: "theirs"}); err != nil {
		t.Fatal(err)
	}

	svc := audit.New(pool)
	// all reads every page of a filter, two entries at a time.
	all := func(f audit.Filter) []string {
		t.Helper()
		var got []string
		var cursor string
		for pages := 0; ; pages++ {
			if pages > 3 {
				t.Fatal("more pages than entries")
			}
			p, err := svc.List(ctx, org, f, cursor, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range p.Rows {
				got = append(got, r.TargetID)
			}
			if p.Next == "" {
				return got
			}
			cursor = p.Next
		}
	}
	for _, tc := range []struct {
		f    audit.Filter
		want []string
	}{
		{audit.Filter{}, []string{"5", "4", "3", "2", "1"}},
		{audit.Filter{Actor: "cora@acme.test"}, []string{"4", "2"}},
		{audit.Filter{Action: "user.create"}, []string{"3", "1"}},
		{audit.Filter{Actor: "ada@acme.test", Action: "alert.dismiss"}, nil},
	} {
		if got := all(tc.f); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v: entries %v, want %v", tc.f, got, tc.want)
		}
	}

	actions, err := svc.Actions(ctx, org)
	if err != nil || !reflect.DeepEqual(actions, []string{"alert.dismiss", "api_key.revoke", "user.create"}) {
		t.Errorf("actions %v, %v", actions, err)
	}

	// A cursor of another list, or a time-and-id cursor, is refused.
	for _, forged := range []string{keyset.EncodeSeq("alerts", 3), keyset.Cursor{ID: uuid.New()}.Encode(audit.ListName)} {
		var inv *errs.Invalid
		if _, err := svc.List(ctx, org, audit.Filter{}, forged, 2); !errors.As(err, &inv) || inv.ByField()["cursor"] == "" {
			t.Errorf("forged cursor: %v, want the cursor field named", err)
		}
	}
}

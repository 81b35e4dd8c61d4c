package models_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/models"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var admin = audit.Actor{Kind: "user", ID: uuid.New(), Label: "ada@acme.test"}

func setup(t *testing.T) (context.Context, *pgxpool.Pool, *models.Service, uuid.UUID, uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	var org, other uuid.UUID
	if err := pool.QueryRow(ctx, "INSERT INTO organizations (slug, name) VALUES ('acme', 'Acme') RETURNING id").Scan(&org); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, "INSERT INTO organizations (slug, name) VALUES ('globex', 'Globex') RETURNING id").Scan(&other); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO users (id, org_id, email, password_hash, role) VALUES ($1, $2, $3, 'x', 'admin')", admin.ID, org, admin.Label); err != nil {
		t.Fatal(err)
	}
	return ctx, pool, models.New(pool, nil, nil, nil), org, other
}

func fields(err error) map[string]string {
	var inv *errs.Invalid
	if !errors.As(err, &inv) {
		return nil
	}
	return inv.ByField()
}

// A model in production today can be registered by hand; versions number
// themselves when no number is given, and a number cannot be taken twice.
func TestRegister(t *testing.T) {
	ctx, _, svc, org, other := setup(t)
	v1, err := svc.Register(ctx, admin, org, models.NewVersion{Name: "tandem-assist", ModelID: "tandem-assist-v2", Description: "in production before Curate"})
	if err != nil {
		t.Fatal(err)
	}
	if v1.Version != "1.0.0" || v1.Status != models.StatusTesting || v1.Kind != models.KindFull || v1.Name != "tandem-assist" {
		t.Errorf("first version: %+v", v1)
	}
	v2, err := svc.Register(ctx, admin, org, models.NewVersion{Name: "tandem-assist", ModelID: "ft:gpt-4o-mini:acme::x1"})
	if err != nil || v2.Version != "1.1.0" || v2.RegisteredModelID != v1.RegisteredModelID {
		t.Errorf("second version: %+v, %v", v2, err)
	}
	_, err = svc.Register(ctx, admin, org, models.NewVersion{Name: "tandem-assist", Version: "1.1.0", ModelID: "x"})
	if f := fields(err); !strings.Contains(f["version"], "already registered") {
		t.Errorf("a taken number: %v", err)
	}
	// Another organisation has its own namespace and cannot read ours.
	theirs, err := svc.Register(ctx, admin, other, models.NewVersion{Name: "tandem-assist", ModelID: "theirs"})
	if err != nil || theirs.Version != "1.0.0" {
		t.Errorf("another organisation's first version: %+v, %v", theirs, err)
	}
	if _, err := svc.Get(ctx, other, v1.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("another organisation reads our version: %v", err)
	}
	page, next, err := svc.List(ctx, org, models.Filter{Name: "tandem-assist"}, nil, 1)
	if err != nil || len(page) != 1 || page[0].ID != v2.ID || next == nil {
		t.Fatalf("first page: %+v, %v", page, err)
	}
	page, next, err = svc.List(ctx, org, models.Filter{Name: "tandem-assist"}, next, 1)
	if err != nil || len(page) != 1 || page[0].ID != v1.ID || next != nil {
		t.Errorf("last page: %+v, %v", page, err)
	}
}

// Bad input is refused field by field and stores nothing.
func TestRegisterRefuses(t *testing.T) {
	ctx, pool, svc, org, _ := setup(t)
	for _, tc := range []struct {
		in    models.NewVersion
		field string
	}{
		{models.NewVersion{Name: "", ModelID: "m"}, "name"},
		{models.NewVersion{Name: "Has Spaces", ModelID: "m"}, "name"},
		{models.NewVersion{Name: "ok", ModelID: ""}, "model_id"},
		{models.NewVersion{Name: "ok", ModelID: "a\x00b"}, "model_id"},
		{models.NewVersion{Name: "ok", ModelID: "m", Version: "1.2"}, "version"},
		{models.NewVersion{Name: "ok", ModelID: "m", Version: "01.2.3"}, "version"},
		{models.NewVersion{Name: "ok", ModelID: "m", Kind: "merged"}, "kind"},
		{models.NewVersion{Name: "ok", ModelID: "/adapters/a", Kind: "lora"}, "base_model"},
	} {
		_, err := svc.Register(ctx, admin, org, tc.in)
		if _, ok := fields(err)[tc.field]; !ok {
			t.Errorf("%+v: want an error on %s, got %v", tc.in, tc.field, err)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM registered_models").Scan(&n); err != nil || n != 0 {
		t.Errorf("refused input stored %d registered models (%v)", n, err)
	}
}

// A job registers once however often its success is seen; a re-run on the
// same data is a patch, new data a minor version.
func TestRegisterTrained(t *testing.T) {
	ctx, pool, svc, org, _ := setup(t)
	job := func() uuid.UUID {
		var id uuid.UUID
		err := pool.QueryRow(ctx, `INSERT INTO fine_tuning_jobs (org_id, dataset_version_id, dataset_label, dataset_kind, provider,
			base_model, method, export_format, train_examples, estimated_tokens, estimated_epochs, price_per_million, price_date, estimated_cost)
			VALUES ($1, gen_random_uuid(), 'Support v1', 'sft', 'openai', 'gpt-4o-mini', 'supervised', 'openai_chat', 10, 1000, 3, 3000000, '2026-11-01', 3000)
			RETURNING id`, org).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	loss := 0.42
	first, second, third := job(), job(), job()
	reg := func(id uuid.UUID, hash string) db.ModelVersion {
		t.Helper()
		var v db.ModelVersion
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			v, err = svc.RegisterTrainedTx(ctx, tx, org, models.TrainedVersion{
				ModelName: "Support answers", JobID: id, ModelID: "ft:gpt-4o-mini:acme::" + id.String()[:8],
				BaseModel: "gpt-4o-mini", Kind: models.KindFull, DatasetHash: hash, TrainLoss: &loss, TrainedTokens: 7680,
			})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	a := reg(first, "aaa")
	if again := reg(first, "aaa"); again.ID != a.ID {
		t.Errorf("a job registered twice: %s and %s", a.ID, again.ID)
	}
	b, c := reg(second, "aaa"), reg(third, "bbb")
	if a.Version != "1.0.0" || b.Version != "1.0.1" || c.Version != "1.1.0" {
		t.Errorf("versions %s, %s, %s; want 1.0.0, 1.0.1, 1.1.0", a.Version, b.Version, c.Version)
	}
	got, err := svc.Get(ctx, org, a.ID)
	if err != nil || got.Name != "support-answers" || got.TrainLoss == nil || *got.TrainLoss != loss || got.FineTuningJobID == nil || *got.FineTuningJobID != first {
		t.Errorf("registered version: %+v, %v", got, err)
	}
	// Its performance metrics hold what is known of it (the seed's
	// training loss and dataset hash); no evaluation has finished yet.
	var metrics map[string]any
	if err := json.Unmarshal(got.PerformanceMetrics, &metrics); err != nil || len(metrics) != 2 || metrics["training_loss"] != loss ||
		metrics["dataset_hash"] != "aaa" || got.Evaluation != nil {
		t.Errorf("performance metrics %s, evaluation %+v (%v)", got.PerformanceMetrics, got.Evaluation, err)
	}
}

// The number can change while testing and not after; status changes are
// kept in the history, which the database refuses to rewrite.
func TestUpdateAndHistory(t *testing.T) {
	ctx, pool, svc, org, _ := setup(t)
	v, err := svc.Register(ctx, admin, org, models.NewVersion{Name: "support", ModelID: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	two := "2.0.0"
	if v, err = svc.Update(ctx, admin, org, v.ID, models.Patch{Version: &two}); err != nil || v.Version != "2.0.0" {
		t.Fatalf("renumber while testing: %+v, %v", v, err)
	}
	deprecated, three := models.StatusDeprecated, "3.0.0"
	if _, err := svc.Update(ctx, admin, org, v.ID, models.Patch{Status: &deprecated}); err != nil {
		t.Fatal(err)
	}
	_, err = svc.Update(ctx, admin, org, v.ID, models.Patch{Version: &three})
	if f := fields(err); !strings.Contains(f["version"], "only while the version is testing") {
		t.Errorf("renumbering a deprecated version: %v", err)
	}
	bogus := "live"
	if _, err := svc.Update(ctx, admin, org, v.ID, models.Patch{Status: &bogus}); fields(err)["status"] == "" {
		t.Errorf("unknown status: %v", err)
	}
	if _, err := svc.Update(ctx, admin, org, uuid.New(), models.Patch{Status: &deprecated}); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}

	h, next, err := svc.History(ctx, org, v.ID, 0, 1)
	if err != nil || len(h) != 1 || h[0].Action != "status_changed" || next == 0 {
		t.Fatalf("history, first page: %+v, %v", h, err)
	}
	h, next, err = svc.History(ctx, org, v.ID, next, 1)
	if err != nil || len(h) != 1 || h[0].Action != "registered" || next != 0 {
		t.Fatalf("history, last page: %+v, %v", h, err)
	}
	for _, stmt := range []string{"UPDATE model_history SET reason = 'rewritten'", "DELETE FROM model_history", "TRUNCATE model_history"} {
		_, err := pool.Exec(ctx, stmt)
		if err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: %v", stmt, err)
		}
	}
	if err := pool.QueryRow(ctx, "SELECT 1 FROM model_history WHERE reason = 'rewritten'").Scan(new(int)); !errors.Is(err, pgx.ErrNoRows) {
		t.Errorf("history was rewritten: %v", err)
	}
}

func TestSlugAndNextVersion(t *testing.T) {
	for in, want := range map[string]string{
		"Support answers Q4":    "support-answers-q4",
		"  --Ünïcode  ":         "n-code",
		"":                      "model",
		"a.b_c":                 "a.b_c",
		strings.Repeat("x", 80): strings.Repeat("x", 64),
	} {
		if got := models.Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
	rows := []db.ModelVersionListSemverRow{{Version: "1.9.0", DatasetHash: "h1"}, {Version: "1.10.2", DatasetHash: "h2"}}
	if got := models.NextVersion(rows, "h3"); got != "1.11.0" {
		t.Errorf("new data after 1.10.2: %s", got)
	}
	if got := models.NextVersion(rows, "h1"); got != "1.10.3" {
		t.Errorf("same data as 1.9.0: %s", got)
	}
}

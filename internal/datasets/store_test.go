package datasets_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/blobstore"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/keyset"
	"github.com/curate/curate/internal/scratch"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type env struct {
	actor audit.Actor // a curator
	pool  *pgxpool.Pool
	svc   *datasets.Service
	org   uuid.UUID
	tmp   string // the root of the service's scratch directory
}

func newEnv(t *testing.T) env {
	t.Helper()
	pool := pgtest.NewDB(t)
	bucket, err := blobstore.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bucket.Close() })
	org, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(context.Background(), "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	u, err := accounts.New(pool, accounts.DefaultSessionTTL).CreateUser(context.Background(), audit.System, org.ID, accounts.NewUser{Email: "cora@acme.test", Role: "curator", Password: "a-long-password-1"})
	if err != nil {
		t.Fatal(err)
	}
	inserter, err := jobq.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	tmpRoot := t.TempDir()
	tmp, err := scratch.Open(tmpRoot)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tmp.Close() })
	actor := audit.Actor{Kind: "user", ID: u.ID, Label: u.Email}
	return env{actor: actor, pool: pool, svc: datasets.New(pool, inserter, bucket, tmp), org: org.ID, tmp: tmpRoot}
}

// scratchFiles lists the files left in the service's scratch directory.
func (e env) scratchFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(e.tmp, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// exportJobs counts the export jobs queued for an export (uuid.Nil: for
// any export).
func (e env) exportJobs(t *testing.T, exportID uuid.UUID) int {
	t.Helper()
	if exportID == uuid.Nil {
		return count(t, e.pool, "SELECT count(*) FROM river_job WHERE kind = 'dataset_export'")
	}
	return count(t, e.pool, "SELECT count(*) FROM river_job WHERE kind = 'dataset_export' AND args->>'export_id' = $1", exportID.String())
}

// pair stores a preference pair the way the pair features do: prompt as
// a message list, a content hash unique per organisation.
func (e env) pair(t *testing.T, query, chosen, rejected string) uuid.UUID {
	t.Helper()
	prompt, _ := json.Marshal([]map[string]string{{"role": "user", "content": query}})
	sum := sha256.Sum256([]byte(query + "\x00" + chosen + "\x00" + rejected))
	var id uuid.UUID
	err := e.pool.QueryRow(context.Background(), `INSERT INTO preference_pairs (org_id, prompt, query, chosen_response, rejected_response, method, content_hash)
		VALUES ($1, $2, $3, $4, $5, 'manual', $6) RETURNING id`, e.org, prompt, query, chosen, rejected, sum[:]).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// pairs stores n distinct pairs.
func (e env) pairs(t *testing.T, n int) []uuid.UUID {
	out := make([]uuid.UUID, n)
	for i := range out {
		out[i] = e.pair(t, fmt.Sprintf("Question %d about deployments?", i), fmt.Sprintf("A careful answer %d.", i), fmt.Sprintf("A careless answer %d.", i))
	}
	return out
}

// feedbackItem stores feedback and moves it to status (correcting it when
// correction is set).
func (e env) feedbackItem(t *testing.T, it feedback.Item, status, correction string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	store := feedback.New(e.pool)
	row, _, err := store.Ingest(ctx, e.org, "api", it)
	id := row.ID
	if err != nil {
		t.Fatal(err)
	}
	ch := feedback.Change{}
	if correction != "" {
		ch.Correction = &correction
	}
	if status != "pending" {
		ch.Status = &status
	}
	if ch.Status != nil || ch.Correction != nil {
		if _, err := store.Update(ctx, e.actor, e.org, id, 1, ch); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

func (e env) dataset(t *testing.T, typ string, set datasets.Settings) db.TrainingDataset {
	t.Helper()
	if set.Name == "" {
		set.Name = "Support " + typ
	}
	d, err := e.svc.Create(context.Background(), e.actor, e.org, datasets.NewDataset{Type: typ, Settings: set})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestFreezeHashStableAndChanging(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	ids := e.pairs(t, 12)
	d := e.dataset(t, datasets.TypeDPO, datasets.Settings{ValidationPercent: 25, SplitSeed: 9})
	if n, err := e.svc.AddMembers(ctx, e.actor, e.org, d.ID, ids); err != nil || n != 12 {
		t.Fatalf("add: %d %v", n, err)
	}
	v1, err := e.svc.Freeze(ctx, e.actor, e.org, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	// 12 × 25% = 3 validation items; one stratum ("method:manual").
	if v1.Number != 1 || v1.ItemCount != 12 || v1.TrainCount != 9 || v1.ValidationCount != 3 || len(v1.ContentHash) != 64 {
		t.Fatalf("version 1: %+v", v1)
	}
	got, _ := e.svc.Get(ctx, e.org, d.ID)
	if got.Dataset.Status != "ready" || got.Current == nil || got.Current.ID != v1.ID {
		t.Fatalf("after freeze: %+v", got.Dataset)
	}

	// The report on the frozen version for the target format: 12 clean
	// pairs score 1. Reading it stores nothing; an export records it.
	rep, err := e.svc.Report(ctx, e.org, d.ID, datasets.ReportRequest{MaskPII: true})
	if err != nil || rep.Version == nil || rep.Version.ID != v1.ID || rep.QualityScore != 1 {
		t.Fatalf("report: %+v %v", rep, err)
	}
	got, _ = e.svc.Get(ctx, e.org, d.ID)
	if got.Dataset.QualityScore.Valid {
		t.Fatalf("reading the report stored a quality score %+v", got.Dataset.QualityScore)
	}

	// A second dataset with the same pairs, added in another order, has
	// the same content and so the same hash.
	d2 := e.dataset(t, datasets.TypeDPO, datasets.Settings{Name: "Copy", ValidationPercent: 25, SplitSeed: 9})
	rev := append([]uuid.UUID(nil), ids...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	if _, err := e.svc.AddMembers(ctx, e.actor, e.org, d2.ID, rev); err != nil {
		t.Fatal(err)
	}
	v2other, err := e.svc.Freeze(ctx, e.actor, e.org, d2.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v2other.ContentHash != v1.ContentHash {
		t.Fatalf("same content, different hash: %s vs %s", v2other.ContentHash, v1.ContentHash)
	}

	// Back to curating with nothing changed: freezing reuses version 1.
	if _, err := e.svc.Transition(ctx, e.actor, e.org, d.ID, "curating"); err != nil {
		t.Fatal(err)
	}
	again, err := e.svc.Freeze(ctx, e.actor, e.org, d.ID)
	if err != nil || again.ID != v1.ID {
		t.Fatalf("refreeze unchanged: %+v %v", again, err)
	}

	// Edit a pair: the next freeze is version 2 with another hash, and
	// version 1 still holds the old text.
	if _, err := e.pool.Exec(ctx, "UPDATE preference_pairs SET chosen_response = 'An edited answer.' WHERE id = $1", ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Transition(ctx, e.actor, e.org, d.ID, "curating"); err != nil {
		t.Fatal(err)
	}
	v2, err := e.svc.Freeze(ctx, e.actor, e.org, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v2.Number != 2 || v2.ContentHash == v1.ContentHash {
		t.Fatalf("after an edit: version %d hash %s (v1 %s)", v2.Number, v2.ContentHash, v1.ContentHash)
	}
	if n := count(t, e.pool, "SELECT count(*) FROM dataset_version_items WHERE version_id = $1 AND content->>'chosen' = 'A careful answer 0.'", v1.ID); n != 1 {
		t.Fatalf("version 1 lost its frozen text (%d)", n)
	}
	if n := count(t, e.pool, "SELECT count(*) FROM dataset_version_items WHERE version_id = $1 AND content->>'chosen' = 'An edited answer.'", v2.ID); n != 1 {
		t.Fatalf("version 2 lacks the edit (%d)", n)
	}
	// Changing the split seed changes the hash too.
	if _, err := e.svc.Update(ctx, e.actor, e.org, d.ID, 0, func(s *datasets.Settings) { s.SplitSeed = 10 }); err != nil {
		t.Fatal(err)
	}
	v3, err := e.svc.Freeze(ctx, e.actor, e.org, d.ID)
	if err != nil || v3.Number != 3 || v3.ContentHash == v2.ContentHash {
		t.Fatalf("after a new seed: %+v %v", v3, err)
	}
}

func TestFreezeRefusals(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	d := e.dataset(t, datasets.TypePreferencePairs, datasets.Settings{})

	// A draft cannot be frozen, nor exported.
	_, err := e.svc.Freeze(ctx, e.actor, e.org, d.ID)
	var inv *errs.Invalid
	if !errors.As(err, &inv) || !strings.Contains(err.Error(), "cannot go from draft to ready") {
		t.Fatalf("freeze a draft: %v", err)
	}
	_, _, err = e.svc.StartExport(ctx, e.actor, e.org, d.ID, datasets.ExportRequest{Format: "trl_preference", MaskPII: true})
	var conflict *errs.Conflict
	if !errors.As(err, &conflict) || !strings.Contains(conflict.Message, "draft") {
		t.Fatalf("export a draft: %v", err)
	}
	if n := e.exportJobs(t, uuid.Nil); n != 0 {
		t.Fatalf("%d export jobs queued for a refused export", n)
	}
	// Curating with no members: a clear error and no version.
	if _, err := e.svc.Transition(ctx, e.actor, e.org, d.ID, "curating"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Freeze(ctx, e.actor, e.org, d.ID); err == nil || !strings.Contains(err.Error(), "no examples") {
		t.Fatalf("freeze empty: %v", err)
	}
	if n := count(t, e.pool, "SELECT count(*) FROM dataset_versions"); n != 0 {
		t.Fatalf("%d versions after failed freezes", n)
	}
	got, _ := e.svc.Get(ctx, e.org, d.ID)
	if got.Dataset.Status != "curating" {
		t.Fatalf("status %s after failed freeze", got.Dataset.Status)
	}
	// Another organisation's id is not found.
	if _, err := e.svc.Get(ctx, uuid.New(), d.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("other org: %v", err)
	}
	// Archive is final.
	if _, err := e.svc.Transition(ctx, e.actor, e.org, d.ID, "archived"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Transition(ctx, e.actor, e.org, d.ID, "curating"); err == nil {
		t.Fatal("an archived dataset came back")
	}
}

func TestAddMembersAllOrNothing(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	approved := e.feedbackItem(t, feedback.Item{Query: "Q1", Response: "A1", FeedbackType: "thumbs_up"}, "approved", "")
	pending := e.feedbackItem(t, feedback.Item{Query: "Q2", Response: "A2", FeedbackType: "thumbs_down"}, "pending", "")
	d := e.dataset(t, datasets.TypeInstructionTuning, datasets.Settings{})
	missing := uuid.New()
	_, err := e.svc.AddMembers(ctx, e.actor, e.org, d.ID, []uuid.UUID{approved, pending, missing})
	var inv *errs.Invalid
	if !errors.As(err, &inv) || len(inv.Errors) != 2 {
		t.Fatalf("want two field errors, got %v", err)
	}
	if inv.Errors[0].Field != "ids[1]" || !strings.Contains(inv.Errors[0].Message, "is pending") ||
		inv.Errors[1].Field != "ids[2]" || !strings.Contains(inv.Errors[1].Message, "no feedback") {
		t.Fatalf("errors: %+v", inv.Errors)
	}
	if n := count(t, e.pool, "SELECT count(*) FROM training_dataset_members"); n != 0 {
		t.Fatalf("%d members after a refused add", n)
	}
	// A pair id in an instruction dataset is refused too.
	p := e.pair(t, "q", "c", "r")
	if _, err := e.svc.AddMembers(ctx, e.actor, e.org, d.ID, []uuid.UUID{p}); err == nil {
		t.Fatal("a pair went into an instruction dataset")
	}
	n, err := e.svc.AddMembers(ctx, e.actor, e.org, d.ID, []uuid.UUID{approved})
	if err != nil || n != 1 {
		t.Fatalf("add approved: %d %v", n, err)
	}
	got, _ := e.svc.Get(ctx, e.org, d.ID)
	if got.Dataset.Status != "curating" || got.MemberCount != 1 {
		t.Fatalf("after add: %s, %d members", got.Dataset.Status, got.MemberCount)
	}
}

func TestAddByFilterCorrectedFeedback(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	fixed := e.feedbackItem(t, feedback.Item{Query: "How do I reset my password?", Response: "No idea.", FeedbackType: "thumbs_down",
		Context: json.RawMessage(`{"messages":[{"role":"system","content":"You are the support assistant."}]}`)},
		"corrected", "Open Settings > Security and choose Reset password.")
	e.feedbackItem(t, feedback.Item{Query: "Q", Response: "A", FeedbackType: "thumbs_up"}, "approved", "")
	e.feedbackItem(t, feedback.Item{Query: "Rejected", Response: "A", FeedbackType: "thumbs_up"}, "rejected", "")
	d := e.dataset(t, datasets.TypeInstructionTuning, datasets.Settings{ValidationPercent: 0})

	n, err := e.svc.AddByFilter(ctx, e.actor, e.org, d.ID, map[string][]string{"status": {"corrected"}})
	if err != nil || n != 1 {
		t.Fatalf("add corrected: %d %v", n, err)
	}
	if _, err := e.svc.AddByFilter(ctx, e.actor, e.org, d.ID, map[string][]string{"status": {"rejected"}}); err == nil {
		t.Fatal("rejected feedback accepted as a filter")
	}
	got, _ := e.svc.Get(ctx, e.org, d.ID)
	if got.Dataset.SavedFilter != "status=corrected" {
		t.Fatalf("saved filter %q", got.Dataset.SavedFilter)
	}
	v, err := e.svc.Freeze(ctx, e.actor, e.org, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	var content string
	if err := e.pool.QueryRow(ctx, "SELECT content::text FROM dataset_version_items WHERE version_id = $1 AND source_id = $2", v.ID, fixed).Scan(&content); err != nil {
		t.Fatal(err)
	}
	var ex datasets.Example
	if err := json.Unmarshal([]byte(content), &ex); err != nil {
		t.Fatal(err)
	}
	if ex.System != "You are the support assistant." || len(ex.Messages) != 2 || ex.Messages[1].Content != "Open Settings > Security and choose Reset password." {
		t.Fatalf("frozen example %+v", ex)
	}
}

// The list pages with the keyset cursor, newest first, each dataset once.
func TestListPages(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	var want []uuid.UUID
	for i := range 5 {
		d := e.dataset(t, datasets.TypeDPO, datasets.Settings{Name: fmt.Sprintf("Set %d", i)})
		want = append([]uuid.UUID{d.ID}, want...)
	}
	var got []uuid.UUID
	var cursor *keyset.Cursor
	for page := 0; ; page++ {
		rows, next, err := e.svc.List(ctx, e.org, datasets.ListFilter{}, cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			got = append(got, r.TrainingDataset.ID)
		}
		if next == nil {
			if page != 2 || len(rows) != 1 {
				t.Fatalf("last page is page %d with %d rows; want page 2 with 1", page, len(rows))
			}
			break
		}
		if cursor, err = keyset.Parse(datasets.ListName, next.Encode(datasets.ListName)); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pages gave %v, want %v (newest first)", got, want)
	}
}

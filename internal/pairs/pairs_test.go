package pairs_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/pairs"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var curator = audit.Actor{Kind: "system", Label: "test"}

func setup(t testing.TB) (*pgxpool.Pool, *pairs.Service, uuid.UUID) {
	t.Helper()
	pool := pgtest.NewDB(t)
	org, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(context.Background(), "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	return pool, pairs.New(pool), org.ID
}

func ingest(t *testing.T, pool *pgxpool.Pool, org uuid.UUID, it feedback.Item) uuid.UUID {
	t.Helper()
	row, _, err := (feedback.New(pool)).Ingest(context.Background(), org, "api", it)
	id := row.ID
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func ptr[T any](v T) *T { return &v }

func fieldsOf(err error) string {
	var inv *errs.Invalid
	if !errors.As(err, &inv) {
		return "not invalid: " + errString(err)
	}
	return strings.Join(inv.Fields(), ",")
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// The hash is sha256 over "<len>:<text>" for system, each turn's role and
// content, chosen and rejected; the expected value is hashed here from the
// bytes written out by hand.
func TestContentHash(t *testing.T) {
	got := pairs.ContentHash("", []pairs.Message{{Role: "user", Content: "Hi?"}}, "Hello.", "Go away")
	want := sha256.Sum256([]byte("0:4:user3:Hi?6:Hello.7:Go away"))
	if string(got) != string(want[:]) {
		t.Fatalf("hash %x, want %x", got, want)
	}
	// Moving a character between fields changes the hash.
	a := pairs.ContentHash("", []pairs.Message{{Role: "user", Content: "ab"}}, "c", "d")
	b := pairs.ContentHash("", []pairs.Message{{Role: "user", Content: "a"}}, "bc", "d")
	if string(a) == string(b) {
		t.Fatal("field boundaries are not part of the hash")
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     pairs.Input
		fields string
	}{
		{"ok", pairs.Input{Query: "q", Chosen: "a", Rejected: "b"}, ""},
		{"identical replies", pairs.Input{Query: "q", Chosen: "Same  answer", Rejected: "same answer"}, "rejected_response"},
		{"empty replies", pairs.Input{Query: "q", Chosen: " ", Rejected: ""}, "chosen_response,rejected_response"},
		{"no query", pairs.Input{Chosen: "a", Rejected: "b"}, "query"},
		{"strength above 1", pairs.Input{Query: "q", Chosen: "a", Rejected: "b", Strength: ptr(1.5)}, "preference_strength"},
		{"strength below 0", pairs.Input{Query: "q", Chosen: "a", Rejected: "b", Strength: ptr(-0.1)}, "preference_strength"},
		{"strength NaN", pairs.Input{Query: "q", Chosen: "a", Rejected: "b", Strength: ptr(math.NaN())}, "preference_strength"},
		{"documents not a list", pairs.Input{Query: "q", Chosen: "a", Rejected: "b", ContextDocuments: json.RawMessage(`{"a":1}`)}, "context_documents"},
		{"prompt ends with the assistant", pairs.Input{Prompt: []pairs.Message{{Role: "user", Content: "q"}, {Role: "assistant", Content: "x"}}, Chosen: "a", Rejected: "b"}, "prompt"},
		{"query is not the last turn", pairs.Input{Prompt: []pairs.Message{{Role: "user", Content: "q"}}, Query: "other", Chosen: "a", Rejected: "b"}, "query"},
		{"unknown method", pairs.Input{Query: "q", Chosen: "a", Rejected: "b", Method: "ranking"}, "method"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &errs.Invalid{}
			tc.in.Validate(v, "")
			if got := strings.Join(v.Fields(), ","); got != tc.fields {
				t.Fatalf("fields %q, want %q (%v)", got, tc.fields, v.Errors)
			}
		})
	}
	in := pairs.Input{Prompt: []pairs.Message{{Role: "user", Content: "hello"}}, Chosen: "a", Rejected: "b"}
	in.Validate(&errs.Invalid{}, "")
	if in.Query != "hello" || *in.Strength != 1 || string(in.ContextDocuments) != "[]" || in.Method != "manual" {
		t.Fatalf("defaults not settled: %+v", in)
	}
}

// Four ranked answers imply 4·3/2 = 6 pairs; the strength is the rank gap
// over the largest gap (3).
func TestImplied(t *testing.T) {
	got := pairs.Implied(4)
	want := []pairs.Implication{{0, 1, 1.0 / 3}, {0, 2, 2.0 / 3}, {0, 3, 1}, {1, 2, 1.0 / 3}, {1, 3, 2.0 / 3}, {2, 3, 1.0 / 3}}
	if len(got) != len(want) {
		t.Fatalf("%d pairs, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Better != want[i].Better || got[i].Worse != want[i].Worse || math.Abs(got[i].Strength-want[i].Strength) > 1e-12 {
			t.Errorf("pair %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestCreateUpdateDelete(t *testing.T) {
	t.Parallel()
	pool, s, org := setup(t)
	ctx := context.Background()
	fb := ingest(t, pool, org, feedback.Item{Query: "How do I reset my password?", Response: "Call us.", FeedbackType: "correction",
		Correction: "Use 'Forgot password' on the sign-in page.", Context: json.RawMessage(`{"documents":[{"title":"KB-1","content":"Reset steps"}]}`)})

	in, err := s.FromFeedback(ctx, org, fb)
	if err != nil {
		t.Fatal(err)
	}
	if in.Chosen != "Use 'Forgot password' on the sign-in page." || in.Rejected != "Call us." || in.Method != "correction" ||
		*in.ChosenFeedbackID != fb || *in.RejectedFeedbackID != fb || !strings.Contains(string(in.ContextDocuments), "KB-1") {
		t.Fatalf("prefill %+v", in)
	}
	in.Strength = ptr(0.75)
	p, err := s.Create(ctx, curator, org, in)
	if err != nil {
		t.Fatal(err)
	}
	if p.Method != "correction" || pairs.Strength(p.PreferenceStrength) != 0.75 || p.Version != 1 {
		t.Fatalf("created %+v", p)
	}
	// The same pair again: a conflict naming the stored one.
	_, err = s.Create(ctx, curator, org, in)
	var conflict *errs.Conflict
	if !errors.As(err, &conflict) {
		t.Fatalf("second create: %v", err)
	}

	// A stale version is refused; the current one swaps.
	if _, err := s.Update(ctx, curator, org, p.ID, 7, pairs.Change{Swap: true}); !errors.As(err, &conflict) {
		t.Fatalf("stale update: %v", err)
	}
	up, err := s.Update(ctx, curator, org, p.ID, 1, pairs.Change{Swap: true, Notes: ptr("original is worse?")})
	if err != nil {
		t.Fatal(err)
	}
	if up.ChosenResponse != "Call us." || up.RejectedResponse != in.Chosen || up.Version != 2 || up.AnnotationNotes != "original is worse?" {
		t.Fatalf("after swap %+v", up)
	}
	if _, err := s.Update(ctx, curator, org, p.ID, 2, pairs.Change{Strength: ptr(2.0)}); fieldsOf(err) != "preference_strength" {
		t.Fatalf("strength 2: %v", err)
	}
	if _, err := s.Update(ctx, curator, org, p.ID, 2, pairs.Change{Chosen: ptr(up.RejectedResponse)}); fieldsOf(err) != "rejected_response" {
		t.Fatalf("identical replies: %v", err)
	}
	// Another organisation sees nothing.
	other, _ := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "other", "Other")
	if _, err := s.Get(ctx, other.ID, p.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("other org: %v", err)
	}
	if err := s.Delete(ctx, curator, org, p.ID, 1); !errors.As(err, &conflict) {
		t.Fatalf("stale delete: %v", err)
	}
	if err := s.Delete(ctx, curator, org, p.ID, 2); err != nil {
		t.Fatal(err)
	}
	var audits int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action IN ('pair.create','pair.update','pair.delete')`).Scan(&audits); err != nil || audits != 3 {
		t.Fatalf("audit entries %d (%v), want 3", audits, err)
	}
}

func TestSaveRanking(t *testing.T) {
	t.Parallel()
	pool, s, org := setup(t)
	ctx := context.Background()
	var ids []uuid.UUID
	for i, r := range []string{"Best answer.", "Good answer.", "Poor answer.", "Wrong answer."} {
		q := "Where is the invoice?"
		if i == 2 {
			q = "  where IS the\tinvoice? " // the same query, written differently
		}
		ids = append(ids, ingest(t, pool, org, feedback.Item{Query: q, Response: r, FeedbackType: "thumbs_up"}))
	}
	ingest(t, pool, org, feedback.Item{Query: "Another question", Response: "x", FeedbackType: "thumbs_up"})
	cands, err := s.Candidates(ctx, org, "where is the invoice?")
	if err != nil || len(cands) != 4 {
		t.Fatalf("candidates %d (%v), want 4", len(cands), err)
	}
	res, err := s.SaveRanking(ctx, curator, org, pairs.Ranking{Query: "Where is the invoice?", Order: ids})
	if err != nil {
		t.Fatal(err)
	}
	if res.Created != 6 || res.Skipped != 0 {
		t.Fatalf("result %+v, want 6 created", res)
	}
	var strengths []float64
	rows, _ := pool.Query(ctx, `SELECT preference_strength FROM preference_pairs WHERE chosen_response = 'Best answer.' ORDER BY 1`)
	for rows.Next() {
		var f float32
		_ = rows.Scan(&f)
		strengths = append(strengths, pairs.Strength(f))
	}
	if len(strengths) != 3 || strengths[0] != 0.3333 || strengths[1] != 0.6667 || strengths[2] != 1 {
		t.Fatalf("strengths of the best answer's pairs %v, want [0.3333 0.6667 1]", strengths)
	}
	again, err := s.SaveRanking(ctx, curator, org, pairs.Ranking{Query: "Where is the invoice?", Order: ids[:3]})
	if err != nil || again.Created != 0 || again.Skipped != 3 {
		t.Fatalf("re-ranking %+v (%v), want 0 created, 3 skipped", again, err)
	}
	if _, err := s.SaveRanking(ctx, curator, org, pairs.Ranking{Query: "Another question", Order: ids[:2]}); fieldsOf(err) != "order" {
		t.Fatalf("answers of another query: %v", err)
	}
	if _, err := s.SaveRanking(ctx, curator, org, pairs.Ranking{Query: "Where is the invoice?", Order: ids[:1]}); fieldsOf(err) != "order" {
		t.Fatalf("one answer: %v", err)
	}
}

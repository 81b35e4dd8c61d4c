package hygiene_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/hygiene"
	"github.com/curate/curate/internal/pairs"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var person = audit.Actor{Kind: "user", Label: "cur@acme.test"}

type fixture struct {
	pool *pgxpool.Pool
	org  uuid.UUID
	svc  *hygiene.Service
	fb   *feedback.Service
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	pool := pgtest.NewDB(t)
	org, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(context.Background(), "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	return fixture{pool: pool, org: org.ID, svc: hygiene.New(pool), fb: feedback.New(pool)}
}

// add stores one item at a given time (each its own request).
func (f fixture) add(t *testing.T, it feedback.Item, at time.Time) uuid.UUID {
	t.Helper()
	if it.FeedbackType == "" {
		it.FeedbackType = "thumbs_down"
	}
	row, _, err := f.fb.Ingest(context.Background(), f.org, "api", it)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(context.Background(), "UPDATE feedback SET created_at = $2 WHERE id = $1", row.ID, at); err != nil {
		t.Fatal(err)
	}
	return row.ID
}

type flagged struct {
	flags    []string
	training bool
}

func (f fixture) state(t *testing.T, id uuid.UUID) flagged {
	t.Helper()
	var s flagged
	if err := f.pool.QueryRow(context.Background(), "SELECT hygiene_flags, is_training_data FROM feedback WHERE id = $1", id).
		Scan(&s.flags, &s.training); err != nil {
		t.Fatal(err)
	}
	return s
}

// Each rule flags what it is for, and leaves alone what only looks like
// it: a user who sent 60 items on a day when the median user sent 2 is an
// outlier, one who sent 60 when everyone sent 60 is not; a comment pasted
// three times is spam, twice is not; a session whose requests come a
// second apart is a bot, one whose items arrived in one batch is not.
func TestRules(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	busy := day.AddDate(0, 0, 1)

	// Day one: 60 items from one user, 2 each from five others.
	var flood, calm []uuid.UUID
	for i := range 60 {
		flood = append(flood, f.add(t, feedback.Item{UserID: "u-flood", Query: fmt.Sprintf("q%d", i), Response: "r"}, day.Add(time.Duration(i)*time.Minute)))
	}
	for u := range 5 {
		for i := range 2 {
			calm = append(calm, f.add(t, feedback.Item{UserID: fmt.Sprintf("u-%d", u), Query: fmt.Sprintf("calm %d %d", u, i), Response: "r"},
				day.Add(time.Duration(u*10+i)*time.Hour/10)))
		}
	}
	// Day two: three users with 60 each: nobody stands out.
	var even []uuid.UUID
	for u := range 3 {
		for i := range 60 {
			even = append(even, f.add(t, feedback.Item{UserID: fmt.Sprintf("even-%d", u), Query: fmt.Sprintf("e%d %d", u, i), Response: "r"},
				busy.Add(time.Duration(i)*time.Minute)))
		}
	}

	// A pasted comment three times, another twice, a near copy three times.
	spam := "Visit cheap-answers.example for better replies!"
	var pasted, twice, near []uuid.UUID
	for i := range 3 {
		pasted = append(pasted, f.add(t, feedback.Item{Query: fmt.Sprintf("p%d", i), Response: "r", Comment: spam}, day.Add(time.Duration(i)*time.Hour)))
	}
	for i := range 2 {
		twice = append(twice, f.add(t, feedback.Item{Query: fmt.Sprintf("t%d", i), Response: "r", Comment: "The answer forgot the refund window."}, day.Add(time.Duration(i)*time.Hour)))
	}
	for i, c := range []string{"Great answer, five stars!!! #1", "great answer five stars 2", "GREAT answer... five stars (3)"} {
		near = append(near, f.add(t, feedback.Item{Query: fmt.Sprintf("n%d", i), Response: "r", Comment: c}, day.Add(time.Duration(i)*time.Hour)))
	}

	// A session of six requests a second apart; another of twelve items
	// stored in one batch (one instant) and two a minute apart.
	var bot []uuid.UUID
	for i := range 6 {
		bot = append(bot, f.add(t, feedback.Item{SessionID: "s-bot", Query: fmt.Sprintf("b%d", i), Response: "r"}, day.Add(time.Duration(i)*time.Second)))
	}
	var batch []feedback.Item
	for i := range 12 {
		batch = append(batch, feedback.Item{SessionID: "s-import", Query: fmt.Sprintf("i%d", i), Response: "r", FeedbackType: "thumbs_up"})
	}
	res, err := f.fb.IngestBatch(ctx, f.org, "file", batch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(ctx, "UPDATE feedback SET created_at = $1 WHERE session_id = 's-import'", day); err != nil {
		t.Fatal(err)
	}
	slow := []uuid.UUID{
		f.add(t, feedback.Item{SessionID: "s-import", Query: "late 1", Response: "r"}, day.Add(time.Minute)),
		f.add(t, feedback.Item{SessionID: "s-import", Query: "late 2", Response: "r"}, day.Add(2*time.Minute)),
	}

	rep, err := f.svc.Check(ctx, f.org, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	// Counted by hand from the items above.
	want := hygiene.Report{RateOutlier: 60, DuplicateSpam: 3, NearDuplicateSpam: 3, BotSession: 6}
	if rep != want {
		t.Errorf("report %+v, want %+v", rep, want)
	}
	expect := func(name string, ids []uuid.UUID, flag string) {
		t.Helper()
		for _, id := range ids {
			s := f.state(t, id)
			if flag == "" && (len(s.flags) != 0 || !s.training) {
				t.Errorf("%s item flagged %v (training %v)", name, s.flags, s.training)
				return
			}
			if flag != "" && (!slices.Equal(s.flags, []string{flag}) || s.training) {
				t.Errorf("%s item flagged %v (training %v), want only %s", name, s.flags, s.training, flag)
				return
			}
		}
	}
	expect("flood", flood, hygiene.RateOutlier)
	expect("calm", calm, "")
	expect("even", even, "")
	expect("pasted", pasted, hygiene.DuplicateSpam)
	expect("twice", twice, "")
	expect("near", near, hygiene.NearDuplicateSpam)
	expect("bot", bot, hygiene.BotSession)
	expect("batch", res.IDs, "")
	expect("slow", slow, "")

	// A second check adds nothing; a fourth paste is flagged by a check of
	// the new items alone.
	if rep, err := f.svc.Check(ctx, f.org, time.Time{}); err != nil || rep.Total() != 0 {
		t.Errorf("second check %+v %v", rep, err)
	}
	later := day.AddDate(0, 0, 5)
	fourth := f.add(t, feedback.Item{Query: "p4", Response: "r", Comment: "  visit CHEAP-answers.example   for better replies!"}, later)
	if rep, err := f.svc.Check(ctx, f.org, later); err != nil || rep != (hygiene.Report{DuplicateSpam: 1}) {
		t.Errorf("check of the new item %+v %v", rep, err)
	}
	expect("fourth paste", []uuid.UUID{fourth}, hygiene.DuplicateSpam)
}

// What is not training data stays out of datasets and pair generation,
// until a person says otherwise; withdrawing their decision lets the flags
// decide again. The refusal names the reason.
func TestExcludedFromDatasets(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	spam := "Buy followers at spam.example, cheapest anywhere"
	var ids []uuid.UUID
	for i := range 3 {
		ids = append(ids, f.add(t, feedback.Item{Query: "How do refunds work?", Response: fmt.Sprintf("Answer %d", i), Comment: spam,
			FeedbackType: "rating", Rating: ptr(1 + 2*i)}, at.Add(time.Duration(i)*time.Hour)))
	}
	clean := f.add(t, feedback.Item{Query: "How do refunds work?", Response: "Within 30 days.", FeedbackType: "rating", Rating: ptr(5)}, at)
	if _, err := f.pool.Exec(ctx, "UPDATE feedback SET status = 'approved'"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Check(ctx, f.org, time.Time{}); err != nil {
		t.Fatal(err)
	}

	ds := datasets.New(f.pool, nil, nil, nil)
	d, err := ds.Create(ctx, person, f.org, datasets.NewDataset{Type: datasets.TypeInstructionTuning, Settings: datasets.Settings{Name: "sft"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ds.AddMembers(ctx, person, f.org, d.ID, []uuid.UUID{clean, ids[0]})
	var inv *errs.Invalid
	if !errors.As(err, &inv) || len(inv.Errors) != 1 || inv.Errors[0].Field != "ids[1]" ||
		!strings.Contains(inv.Errors[0].Message, "not training data: its comment is pasted on other items") {
		t.Fatalf("adding a flagged item: %v", err)
	}
	if n, err := ds.AddByFilter(ctx, person, f.org, d.ID, nil); err != nil || n != 1 {
		t.Errorf("by filter added %d (%v), want the clean item alone", n, err)
	}

	// Pairs: the clean answer beats none of the flagged ones until a
	// person lets one back in.
	ps := pairs.New(f.pool)
	gen := pairs.Generation{Method: "same_query"}
	if p, err := ps.Preview(ctx, f.org, gen); err != nil || p.Candidates != 0 {
		t.Errorf("preview with flagged items %+v %v", p, err)
	}
	use := true
	st, err := f.svc.Decide(ctx, person, f.org, ids[0], &use)
	if err != nil || !st.IsTrainingData || st.DecidedBy != person.Label || !slices.Equal(st.HygieneFlags, []string{hygiene.DuplicateSpam}) {
		t.Fatalf("decided %+v %v", st, err)
	}
	if p, err := ps.Preview(ctx, f.org, gen); err != nil || p.Candidates != 1 || p.Samples[0].RejectedFeedbackID != ids[0] {
		t.Errorf("preview once let in %+v %v", p, err)
	}
	// A new check leaves the person's decision alone.
	if _, err := f.pool.Exec(ctx, "UPDATE feedback SET hygiene_flags = '{}' WHERE id = $1", ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Check(ctx, f.org, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if s := f.state(t, ids[0]); !s.training {
		t.Errorf("a check overruled the person: %+v", s)
	}
	st, err = f.svc.Decide(ctx, person, f.org, ids[0], nil)
	if err != nil || st.IsTrainingData || st.DecidedBy != "" {
		t.Errorf("withdrawn %+v %v", st, err)
	}
	other, err := accounts.New(f.pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "globex", "Globex")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Decide(ctx, person, other.ID, ids[0], &use); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("another organisation's item: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

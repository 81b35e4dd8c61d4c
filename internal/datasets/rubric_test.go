package datasets_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"

	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/blobstore"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/rubrics"
)

// triage is a rubric with a label and a rating question, and two
// reviewers to answer it besides the env's curator.
type triage struct {
	rubric     rubrics.Rubric
	svc        *rubrics.Service
	ann, bruno audit.Actor
}

func newTriage(t *testing.T, e env) triage {
	t.Helper()
	ctx := context.Background()
	acc := accounts.New(e.pool, accounts.DefaultSessionTTL)
	var rev [2]audit.Actor
	for i, email := range []string{"ann@acme.test", "bruno@acme.test"} {
		u, err := acc.CreateUser(ctx, audit.System, e.org, accounts.NewUser{Email: email, Role: "curator", Password: "a-long-password-1"})
		if err != nil {
			t.Fatal(err)
		}
		rev[i] = audit.Actor{Kind: "user", ID: u.ID, Label: u.Email}
	}
	lo, hi := 1, 5
	svc := rubrics.New(e.pool)
	r, err := svc.Create(ctx, e.actor, e.org, rubrics.Input{Name: "Clinical triage", Questions: []rubrics.Question{
		{Key: "urgency_missed", Kind: rubrics.KindLabel, Title: "Urgency missed?", Options: []string{"none", "minor", "critical"}, Required: true},
		{Key: "clarity", Kind: rubrics.KindRating, Title: "Clarity", Min: &lo, Max: &hi},
		{Key: "note", Kind: rubrics.KindText, Title: "Note"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return triage{rubric: r, svc: svc, ann: rev[0], bruno: rev[1]}
}

func (tr triage) answer(t *testing.T, e env, who audit.Actor, id uuid.UUID, urgency string, clarity int) {
	t.Helper()
	raw := map[string]json.RawMessage{"urgency_missed": json.RawMessage(fmt.Sprintf("%q", urgency)), "clarity": json.RawMessage(fmt.Sprint(clarity))}
	if _, err := tr.svc.Answer(context.Background(), who, e.org, id, tr.rubric.ID, raw); err != nil {
		t.Fatal(err)
	}
}

// A dataset's filter keeps the items whose settled answer is the one
// asked: the reviewers' answer where they agree, the adjudicated one where
// an adjudicator decided; disputed and differently answered items stay out.
func TestAddByFilterRubricAnswer(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	tr := newTriage(t, e)
	item := func(q string) uuid.UUID {
		return e.feedbackItem(t, feedback.Item{Query: q, Response: "Rest and fluids; see a doctor if it lasts.", FeedbackType: "thumbs_up"}, "approved", "")
	}
	agreedNone, agreedCritical, disputed, adjudicatedNone, unanswered := item("Fever for two days?"), item("Chest pain at rest?"),
		item("Headache after a fall?"), item("Rash after a new drug?"), item("Sore throat?")
	tr.answer(t, e, tr.ann, agreedNone, "none", 4)
	tr.answer(t, e, tr.bruno, agreedNone, "none", 3)
	tr.answer(t, e, tr.ann, agreedCritical, "critical", 4)
	tr.answer(t, e, tr.bruno, agreedCritical, "critical", 4)
	tr.answer(t, e, tr.ann, disputed, "none", 4)
	tr.answer(t, e, tr.bruno, disputed, "minor", 4)
	tr.answer(t, e, tr.ann, adjudicatedNone, "critical", 2)
	tr.answer(t, e, tr.bruno, adjudicatedNone, "none", 2)
	if _, err := tr.svc.Adjudicate(ctx, e.actor, e.org, adjudicatedNone, tr.rubric.ID, map[string]json.RawMessage{"urgency_missed": json.RawMessage(`"none"`)}); err != nil {
		t.Fatal(err)
	}
	_ = unanswered

	d := e.dataset(t, datasets.TypeInstructionTuning, datasets.Settings{ValidationPercent: 0})
	filter := url.Values{"status": {"approved"}, datasets.ParamRubric: {tr.rubric.ID.String()}, datasets.ParamQuestion: {"urgency_missed"}, datasets.ParamAnswer: {"none"}}
	n, err := e.svc.AddByFilter(ctx, e.actor, e.org, d.ID, filter)
	if err != nil || n != 2 {
		t.Fatalf("added %d, %v; want the agreed and the adjudicated item", n, err)
	}
	members := memberIDs(t, e, d.ID)
	if want := []uuid.UUID{agreedNone, adjudicatedNone}; !sameIDs(members, want) {
		t.Fatalf("members %v, want %v", members, want)
	}
	got, _ := e.svc.Get(ctx, e.org, d.ID)
	saved, _ := url.ParseQuery(got.Dataset.SavedFilter)
	if saved.Get(datasets.ParamQuestion) != "urgency_missed" || saved.Get(datasets.ParamAnswer) != "none" || saved.Get(datasets.ParamRubric) != tr.rubric.ID.String() {
		t.Fatalf("saved filter %q leaves out the answer condition", got.Dataset.SavedFilter)
	}

	// A rating selects by its value: clarity 4 is agreed on one item
	// (agreedCritical); the others differ or are another value.
	d2 := e.dataset(t, datasets.TypeInstructionTuning, datasets.Settings{Name: "Clear answers", ValidationPercent: 0})
	n, err = e.svc.AddByFilter(ctx, e.actor, e.org, d2.ID, url.Values{datasets.ParamRubric: {tr.rubric.ID.String()}, datasets.ParamQuestion: {"clarity"}, datasets.ParamAnswer: {"4"}})
	if err != nil || n != 2 || !sameIDs(memberIDs(t, e, d2.ID), []uuid.UUID{agreedCritical, disputed}) {
		t.Fatalf("clarity 4: added %d, %v, members %v", n, err, memberIDs(t, e, d2.ID))
	}

	// Unknown questions and answers are refused by their field, adding nothing.
	for _, c := range []struct {
		q, a, field string
	}{
		{"urgency", "none", datasets.ParamQuestion},
		{"urgency_missed", "severe", datasets.ParamAnswer},
		{"clarity", "9", datasets.ParamAnswer},
		{"note", "x", datasets.ParamQuestion},
		{"", "none", datasets.ParamQuestion},
	} {
		_, err := e.svc.AddByFilter(ctx, e.actor, e.org, d.ID, url.Values{datasets.ParamRubric: {tr.rubric.ID.String()}, datasets.ParamQuestion: {c.q}, datasets.ParamAnswer: {c.a}})
		var inv *errs.Invalid
		if !errors.As(err, &inv) || inv.ByField()[c.field] == "" {
			t.Errorf("%s = %s: %v, want a field error on %s", c.q, c.a, err, c.field)
		}
	}
	_, err = e.svc.AddByFilter(ctx, e.actor, e.org, d.ID, url.Values{datasets.ParamRubric: {uuid.NewString()}, datasets.ParamQuestion: {"urgency_missed"}, datasets.ParamAnswer: {"none"}})
	var inv *errs.Invalid
	if !errors.As(err, &inv) || inv.ByField()[datasets.ParamRubric] == "" {
		t.Errorf("unknown rubric: %v", err)
	}
	if n := len(memberIDs(t, e, d.ID)); n != 2 {
		t.Fatalf("refused filters changed the members: %d", n)
	}
}

func memberIDs(t *testing.T, e env, id uuid.UUID) []uuid.UUID {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), "SELECT feedback_id FROM training_dataset_members WHERE dataset_id = $1 AND feedback_id IS NOT NULL", id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []uuid.UUID
	for rows.Next() {
		var u uuid.UUID
		if err := rows.Scan(&u); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

func sameIDs(a, b []uuid.UUID) bool {
	cmp := func(x, y uuid.UUID) int { return slices.Compare(x[:], y[:]) }
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, cmp)
	slices.SortFunc(b, cmp)
	return slices.Equal(a, b)
}

// A frozen feedback dataset carries each item's settled rubric answers,
// and its Parquet export has them as a rubric_answers column (masked with
// the rest when personal data is masked); OpenAI chat lines keep their
// fixed shape, messages only.
func TestExportCarriesRubricAnswers(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	tr := newTriage(t, e)
	item := func(q string) uuid.UUID {
		return e.feedbackItem(t, feedback.Item{Query: q, Response: "Rest and fluids; see a doctor if it lasts.", FeedbackType: "thumbs_up"}, "approved", "")
	}
	agreed, adjudicated, plain := item("Fever for two days?"), item("Rash after a new drug?"), item("Sore throat?")
	tr.answer(t, e, tr.ann, agreed, "none", 4)
	tr.answer(t, e, tr.bruno, agreed, "none", 3)
	if _, err := tr.svc.Answer(ctx, tr.ann, e.org, agreed, tr.rubric.ID, map[string]json.RawMessage{"urgency_missed": json.RawMessage(`"none"`),
		"clarity": json.RawMessage(`4`), "note": json.RawMessage(`"asked by ` + secretEmail + `"`)}); err != nil {
		t.Fatal(err)
	}
	tr.answer(t, e, tr.ann, adjudicated, "critical", 2)
	tr.answer(t, e, tr.bruno, adjudicated, "none", 2)
	if _, err := tr.svc.Adjudicate(ctx, e.actor, e.org, adjudicated, tr.rubric.ID, map[string]json.RawMessage{"urgency_missed": json.RawMessage(`"none"`)}); err != nil {
		t.Fatal(err)
	}
	d := e.dataset(t, datasets.TypeInstructionTuning, datasets.Settings{ValidationPercent: 0})
	if _, err := e.svc.AddMembers(ctx, e.actor, e.org, d.ID, []uuid.UUID{agreed, adjudicated, plain}); err != nil {
		t.Fatal(err)
	}
	v, err := e.svc.Freeze(ctx, e.actor, e.org, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Disputed questions are left out: clarity on the agreed item (4
	// against 3); the adjudicated item's urgency is the adjudicator's.
	want := map[string]string{
		"Fever for two days?":    `{"Clinical triage":{"note":"asked by ` + secretEmail + `","urgency_missed":"none"}}`,
		"Rash after a new drug?": `{"Clinical triage":{"clarity":2,"urgency_missed":"none"}}`,
		"Sore throat?":           ``,
	}
	bucket, err := blobstore.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	for _, masked := range []bool{false, true} {
		prefix := fmt.Sprintf("p%v/", masked)
		if _, err := datasets.WriteFiles(ctx, e.pool, bucket, e.svc.Scratch, prefix, v, export.Parquet, masked, nil); err != nil {
			t.Fatal(err)
		}
		data := read(t, bucket, prefix+"train.parquet")
		rows, err := parquet.Read[export.ParquetSFTRubricRow](bytes.NewReader(data), int64(len(data)))
		if err != nil || len(rows) != 3 {
			t.Fatalf("parquet: %d rows, %v", len(rows), err)
		}
		for _, r := range rows {
			w := want[r.Messages[0].Content]
			if masked {
				w = strings.ReplaceAll(w, secretEmail, "[EMAIL]")
			}
			if r.RubricAnswers != w {
				t.Errorf("masked %v, %q: rubric_answers %s, want %s", masked, r.Messages[0].Content, r.RubricAnswers, w)
			}
		}
	}
	if _, err := datasets.WriteFiles(ctx, e.pool, bucket, e.svc.Scratch, "chat/", v, export.OpenAIChat, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(read(t, bucket, "chat/train.jsonl"))), "\n") {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &obj); err != nil || len(obj) != 1 || obj["messages"] == nil {
			t.Fatalf("openai chat line %s (%v): want messages only", line, err)
		}
	}
}

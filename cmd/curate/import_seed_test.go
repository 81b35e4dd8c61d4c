package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
)

// curate import --kind seed001 and --kind seed004 bring in the seeds'
// records as those systems store them, on the dates they were given: the
// queue's order is history's, a record on a logged best-of-N answer gets
// its answer, a curator's address names the user, and a file of one seed's
// records named as the other's is refused naming the field.
func TestImportSeedKinds(t *testing.T) {
	pool, url := pgtest.NewDBURL(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("CURATE_DATA_DIR", t.TempDir())
	ctx := context.Background()
	acc := accounts.New(pool, accounts.DefaultSessionTTL)
	org, err := acc.EnsureOrg(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	ada, err := acc.CreateUser(ctx, audit.System, org.ID, accounts.NewUser{Email: "ada@acme.test", Role: "curator", Password: "correct horse battery staple"})
	if err != nil {
		t.Fatal(err)
	}
	logged, err := db.New(pool).SelectionInsert(ctx, db.SelectionInsertParams{OrgID: org.ID, Query: "Is the shop open on Sunday?",
		Context: []byte(`{"store": "hanoi-1"}`), Scorer: []byte(`{"rules": ["refusal"]}`), Selection: "max", GenerationMethod: "provided",
		Candidates: []byte(`[{"text": "No, it is closed.", "score": 0.2}, {"text": "Yes, 9 to 17.", "score": 0.9}]`), Selected: 1, RewardScore: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, lines ...string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	type stored struct {
		ext, typ, query, response, comment, correction, trainingSetBy string
		rating                                                        *int16
		at                                                            time.Time
		useIt, givenBy                                                bool
	}
	queue := func() []stored {
		rows, err := pool.Query(ctx, `SELECT external_id, feedback_type::text, query, response, comment, correction, training_set_by,
			rating, created_at, is_training_data, given_by IS NOT NULL FROM feedback ORDER BY created_at DESC, id DESC`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []stored
		for rows.Next() {
			var s stored
			if err := rows.Scan(&s.ext, &s.typ, &s.query, &s.response, &s.comment, &s.correction, &s.trainingSetBy, &s.rating, &s.at, &s.useIt, &s.givenBy); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return out
	}

	seed001 := write("feedback_data.jsonl",
		`{"feedback_id": "f-2", "response_id": "`+logged.ID.String()+`", "user_id": "u-1", "session_id": "s-1", "rating_overall": 5, "rating_dimensions": {"accuracy": 5, "helpfulness": 5, "clarity": 4, "safety": 5}, "text_feedback": "Exactly right.", "reaction_type": "thumbs_up", "context": {"previous_messages": [], "user_profile": {"location": "Hanoi"}}, "timestamp": "2025-09-02T10:00:00Z", "is_training_data": true}`,
		`{"feedback_id": "f-1", "response_id": "r-old", "user_id": "u-2", "session_id": "s-2", "rating_overall": 1, "text_feedback": "Wrong store.", "reaction_type": "thumbs_down", "context": {"query": "Where is the shop?"}, "response": "On the moon.", "timestamp": "2025-09-01T08:00:00Z", "is_training_data": false}`,
		`{"feedback_id": "f-3", "response_id": "r-new", "user_id": "u-3", "session_id": "s-3", "reaction_type": "neutral", "context": {"query": "Any parking?"}, "response": "Some.", "timestamp": "2025-09-03T12:00:00Z"}`,
	)
	out, stderr, err := runCLI(t, "", "import", "--org", "acme", "--kind", "seed001", seed001)
	if err != nil {
		t.Fatalf("%v; stderr %s", err, stderr)
	}
	if want := "imported feedback_data.jsonl into acme: 3 stored, 0 already there, 0 skipped"; !strings.Contains(out, want) {
		t.Fatalf("output %q, want %q", out, want)
	}
	got := queue()
	if len(got) != 3 || got[0].ext != "f-3" || got[1].ext != "f-2" || got[2].ext != "f-1" {
		t.Fatalf("queue %+v, want f-3, f-2, f-1 by their timestamps", got)
	}
	f2, f1, f3 := got[1], got[2], got[0]
	if f2.query != logged.Query || f2.response != "Yes, 9 to 17." || f2.typ != "thumbs_up" || f2.rating == nil || *f2.rating != 5 ||
		f2.comment != "Exactly right." || !f2.at.Equal(time.Date(2025, 9, 2, 10, 0, 0, 0, time.UTC)) || !f2.useIt || f2.trainingSetBy != "cli" {
		t.Errorf("record on the logged answer stored as %+v", f2)
	}
	if f1.query != "Where is the shop?" || f1.response != "On the moon." || f1.useIt || f1.trainingSetBy != "cli" {
		t.Errorf("record kept from training stored as %+v", f1)
	}
	if f3.typ != "neutral" || !f3.useIt || f3.trainingSetBy != "" {
		t.Errorf("neutral record stored as %+v", f3)
	}

	seed004 := write("rlhf_feedback.jsonl",
		`{"id": "r-1", "session_id": "a", "query": "Export?", "response": "Press Export.", "feedback_type": "thumbs_up", "feedback_value": true, "curator_email": "ada@acme.test", "organization": "acme", "created_at": "2025-08-01 09:00:00+00"}`,
		`{"id": "r-2", "session_id": "a", "query": "Export as CSV?", "response": "No.", "feedback_type": "thumbs_down", "feedback_value": null, "curator_email": "ada@acme.test", "organization": "acme", "created_at": "2025-08-02 09:00:00+00"}`,
		`{"id": "r-3", "session_id": "b", "query": "Print?", "response": "Press Print.", "feedback_type": "rating", "feedback_value": {"rating": 4}, "curator_email": "ada@acme.test", "organization": "acme", "created_at": "2025-08-03 09:00:00+00"}`,
		`{"id": "r-4", "session_id": "b", "query": "Share?", "response": "You cannot.", "feedback_type": "correction", "feedback_value": "Press Share and pick a colleague.", "curator_email": "ada@acme.test", "organization": "acme", "created_at": "2025-08-04 09:00:00+00"}`,
		`{"id": "r-5", "session_id": "c", "query": "Delete?", "response": "Press Delete.", "feedback_type": "detailed", "feedback_value": {"accuracy": 4, "helpfulness": 4, "clarity": 5, "safety": 3, "comment": "Warn first."}, "curator_email": "ada@acme.test", "organization": "acme", "created_at": "2025-08-05 09:00:00+00"}`,
	)
	for _, want := range []string{"5 stored, 0 already there", "0 stored, 5 already there"} {
		out, stderr, err = runCLI(t, "", "import", "--org", "acme", "--kind", "seed004", seed004)
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("seed004 import: %q, %v (stderr %s); want %q", out, err, stderr, want)
		}
	}
	got = queue()
	if len(got) != 8 {
		t.Fatalf("%d rows after both imports, want 8", len(got))
	}
	var order []string
	for _, s := range got[3:] {
		order = append(order, s.ext+":"+s.typ)
		if !s.givenBy {
			t.Errorf("%s: given_by not set to %s", s.ext, ada.Email)
		}
	}
	if strings.Join(order, " ") != "r-5:detailed r-4:correction r-3:rating r-2:thumbs_down r-1:thumbs_up" {
		t.Errorf("seed 004 rows in the queue: %v", order)
	}
	if r4 := got[4]; r4.correction != "Press Share and pick a colleague." {
		t.Errorf("correction stored as %q", r4.correction)
	}
	if r5 := got[3]; r5.comment != "Warn first." || !r5.at.Equal(time.Date(2025, 8, 5, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("detailed row stored as %+v", r5)
	}

	// Refused whole, naming the line and the field; nothing stored.
	for _, c := range []struct {
		kind, file string
		want       []string
	}{
		{"seed004", write("bad004.jsonl",
			`{"id": "r-9", "query": "q", "response": "r", "feedback_type": "thumbs_up", "curator_email": "ada@acme.test", "organization": "acme", "created_at": "2025-08-06 09:00:00+00"}`,
			`{"id": "r-10", "query": "q", "response": "r", "feedback_type": "thumbs_up", "curator_email": "grace@acme.test", "organization": "acme", "created_at": "2025-08-06 09:00:00+00"}`),
			[]string{"line 2", "curator_email", "grace@acme.test", "nothing was stored"}},
		{"seed004", seed001, []string{"line 1", "feedback_id", "seed001"}},
		{"seed001", seed004, []string{"line 1", "curator_email", "seed004"}},
	} {
		_, _, err := runCLI(t, "", "import", "--org", "acme", "--kind", c.kind, c.file)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("import of %s as %s: %v, want %q in it", filepath.Base(c.file), c.kind, err, w)
			}
		}
	}
	if n := len(queue()); n != 8 {
		t.Errorf("%d rows after the refused imports, want 8", n)
	}
}

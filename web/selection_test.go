package web_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/web/webtest"
)

// "Add to dataset…" names a new dataset when none is open (or none fits):
// the dataset is created with the selection in it, in one step, and the
// list comes back as it was with a link to it. A refused selection, a
// missing name or a type that cannot hold the selection leaves no dataset
// behind.
func TestAddSelectionToNewDataset(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "cu@acme.test", "curator")
	c := s.SignedIn("cu@acme.test")
	approved := storeItem(t, s, org, "Approved one", "approved", 0, nil, time.Now())
	corrected := storeItem(t, s, org, "Corrected one", "corrected", 0, nil, time.Now())
	pending := storeItem(t, s, org, "Pending one", "pending", 0, nil, time.Now())
	pairs := storePairs(t, s, org, 3)

	datasetsNamed := func(name string) (ids []string) {
		t.Helper()
		rows, err := s.Pool.Query(context.Background(), `SELECT id::text FROM training_datasets WHERE org_id = $1 AND name = $2`, org, name)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		return ids
	}

	// With no open dataset, the queue's selection bar has the new one chosen.
	queue := c.Get("/feedback?status=approved").Must(t, http.StatusOK).Body
	if !strings.Contains(queue, `id="new-dataset-choice" checked`) || !strings.Contains(queue, `name="new_dataset_name"`) {
		t.Fatal("the queue's Add to dataset does not offer a new dataset")
	}

	msg := flashAfter(t, c, c.PostForm("/feedback/add-to-dataset", url.Values{"dataset": {"new"}, "new_dataset_name": {"Approved answers"},
		"new_dataset_type": {"instruction_tuning"}, "ids": {approved, corrected}, "filter": {"status=approved"}}))
	created := datasetsNamed("Approved answers")
	if len(created) != 1 {
		t.Fatalf("%d datasets named Approved answers", len(created))
	}
	if !strings.Contains(msg, "2 feedback items added to the new dataset Approved answers.") || !strings.Contains(msg, `href="/datasets/`+created[0]+`"`) {
		t.Errorf("flash %q", msg)
	}
	want := []string{approved, corrected}
	slices.Sort(want)
	if got := memberIDs(t, s, created[0]); !slices.Equal(got, want) {
		t.Errorf("members %v, want %v", got, want)
	}
	var typ, status string
	if err := s.Pool.QueryRow(context.Background(), `SELECT dataset_type::text, status::text FROM training_datasets WHERE id = $1`, created[0]).Scan(&typ, &status); err != nil {
		t.Fatal(err)
	}
	if typ != "instruction_tuning" || status != "curating" {
		t.Errorf("the new dataset is %s, %s; want instruction_tuning, curating", typ, status)
	}
	assertAudit(t, s, "dataset.create", "dataset.members_add")

	// Refusals leave nothing behind.
	for _, r := range []struct {
		name string
		form url.Values
		want string
	}{
		{"a pending item", url.Values{"dataset": {"new"}, "new_dataset_name": {"Mixed"}, "ids": {approved, pending}}, "is pending"},
		{"no name", url.Values{"dataset": {"new"}, "new_dataset_name": {"  "}, "ids": {approved}}, "Name the new dataset"},
		{"the wrong type", url.Values{"dataset": {"new"}, "new_dataset_name": {"Wrong"}, "new_dataset_type": {"dpo"}, "ids": {approved}},
			"must be one of instruction_tuning for feedback items"},
		{"a name too long", url.Values{"dataset": {"new"}, "new_dataset_name": {strings.Repeat("n", 201)}, "ids": {approved}}, "at most 200 characters"},
	} {
		msg := flashAfter(t, c, c.PostForm("/feedback/add-to-dataset", r.form))
		if !strings.Contains(msg, r.want) {
			t.Errorf("%s: flash %q, want %q", r.name, msg, r.want)
		}
		if name := strings.TrimSpace(r.form.Get("new_dataset_name")); name != "" && len(datasetsNamed(name)) != 0 {
			t.Errorf("%s: a dataset was left behind", r.name)
		}
	}
	var n int
	if err := s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM training_datasets WHERE org_id = $1`, org).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d datasets after the refusals (%v), want 1", n, err)
	}

	// Pairs: a name typed without choosing (no script to pick the choice)
	// is a new dataset too, of the type chosen; back to the list as it was.
	res := c.PostForm("/pairs/add-to-dataset", url.Values{"new_dataset_name": {"Pairs for DPO"}, "new_dataset_type": {"dpo"},
		"ids": pairs[:2], "back": {"method=manual"}})
	if loc := res.Header.Get("Location"); loc != "/pairs?method=manual" {
		t.Errorf("back to %q, want the list as it was", loc)
	}
	msg = flashAfter(t, c, res)
	prefs := datasetsNamed("Pairs for DPO")
	if len(prefs) != 1 || !strings.Contains(msg, "2 pairs added to the new dataset Pairs for DPO.") {
		t.Fatalf("flash %q, datasets %v", msg, prefs)
	}
	want = slices.Clone(pairs[:2])
	slices.Sort(want)
	if got := memberIDs(t, s, prefs[0]); !slices.Equal(got, want) {
		t.Errorf("members %v, want %v", got, want)
	}
	// The new dataset is open, so the list offers it next time.
	if list := c.Get("/pairs").Must(t, http.StatusOK).Body; !strings.Contains(list, `value="`+prefs[0]+`"`) {
		t.Error("the pairs list does not offer the new dataset")
	}
	// A viewer cannot.
	s.User(org, "vi@acme.test", "viewer")
	s.SignedIn("vi@acme.test").PostForm("/pairs/add-to-dataset", url.Values{"dataset": {"new"}, "new_dataset_name": {"Nope"}, "ids": pairs[2:]}).
		Must(t, http.StatusForbidden)
}

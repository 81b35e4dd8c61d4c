package web_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/web/webtest"
)

// addPairsBySelection, in a browser signed in as a curator of org: ticks
// three pairs on the pairs list, picks a dataset from "Add to dataset…",
// confirms, and checks the dataset holds exactly those three. No id is
// typed anywhere.
func addPairsBySelection(t *testing.T, s *webtest.Server, ctx context.Context, org uuid.UUID) {
	t.Helper()
	pairs := storePairs(t, s, org, 5)
	ds := newDataset(t, s, org, "Support preferences", datasets.TypePreferencePairs)
	newDataset(t, s, org, "Instructions", datasets.TypeInstructionTuning) // not offered: it holds feedback
	picked := []string{pairs[0], pairs[2], pairs[4]}

	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/pairs"),
		chromedp.WaitVisible(`#pairs`),
		// Nothing ticked: the selection bar stays out of the way.
		chromedp.WaitNotVisible(`#pairs-select`),
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range picked {
		if err := chromedp.Do(ctx, chromedp.Click(`tr[data-pair="`+id+`"] input[type=checkbox]`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#pairs-select`)); err != nil {
		t.Fatal(err)
	}
	if n := text(t, ctx, `#pairs-select [data-selection-count]`); n != "3 selected" {
		t.Fatalf("selection count %q", n)
	}
	if offered := text(t, ctx, `#add-to-dataset`); strings.Contains(offered, "Instructions") {
		t.Fatalf("offers a dataset of the other kind: %q", offered)
	}
	err = chromedp.Do(ctx,
		chromedp.Click(`#add-to-dataset > summary`),
		chromedp.WaitVisible(`input[name=dataset][value="`+ds+`"]`),
		chromedp.Click(`input[name=dataset][value="`+ds+`"]`),
		chromedp.Click(`#add-to-dataset-confirm`),
		chromedp.WaitVisible(`.flash-ok`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if msg := text(t, ctx, `.flash-ok`); !strings.Contains(msg, "3 pairs added to Support preferences.") {
		t.Fatalf("flash %q", msg)
	}
	webtest.Screenshot(t, ctx, "pairs-added-to-dataset")

	// The flash links to the dataset, whose page lists exactly the three.
	if err := chromedp.Do(ctx, chromedp.Click(`.flash-ok a`), chromedp.WaitVisible(`#members`)); err != nil {
		t.Fatal(err)
	}
	members, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#members tr[data-member]")).map(r => r.dataset.member)`))
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(picked)
	slices.Sort(want)
	slices.Sort(members)
	if !slices.Equal(members, want) {
		t.Fatalf("the dataset's page lists %v, want %v", members, want)
	}
	if got := memberIDs(t, s, ds); !slices.Equal(got, want) {
		t.Fatalf("stored members %v, want %v", got, want)
	}
}

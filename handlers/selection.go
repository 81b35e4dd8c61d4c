package handlers

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/pairs"
	"github.com/curate/curate/views"
)

// PairsToDataset adds the pairs ticked on the pairs list to the open
// dataset picked in its selection bar.
func (h *Handlers) PairsToDataset(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return errs.InvalidField("form", "could not be read")
	}
	back := "/pairs"
	// Back to the list as it was: its filter and page, if they still parse.
	if q, err := url.ParseQuery(form.Get("back")); err == nil {
		if _, err := pairs.ParseFilter(q.Get); err == nil {
			keep := url.Values{}
			for _, k := range []string{"method", "tag", "q", "cursor"} {
				if v := q.Get(k); v != "" {
					keep.Set(k, v)
				}
			}
			if len(keep) > 0 {
				back += "?" + keep.Encode()
			}
		}
	}
	return h.addSelection(c, form, datasets.KindPreference, back, "pair", "pairs")
}

// FeedbackToDataset adds the items selected in the queue's bulk bar to
// the open dataset picked there.
func (h *Handlers) FeedbackToDataset(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return errs.InvalidField("form", "could not be read")
	}
	back := "/feedback"
	if fq := queueQueryParam(form.Get("filter")); fq != "" {
		back += "?" + fq
	}
	if form.Get("all") == "1" {
		h.Sessions.Flash(c, "error", "Add to dataset takes the rows you select; to add everything a filter matches, use “Add all matching” on the dataset's page.")
		return redirect(c, back)
	}
	return h.addSelection(c, form, datasets.KindSFT, back, "feedback item", "feedback items")
}

// addSelection adds a selection of ids to the dataset named in the form
// and goes back to the list, saying what was added or why nothing was.
func (h *Handlers) addSelection(c echo.Context, form url.Values, kind, back, one, many string) error {
	var ids []uuid.UUID
	for _, field := range form["ids"] {
		for _, raw := range splitIDs(field) {
			id, err := uuid.Parse(raw)
			if err != nil {
				h.Sessions.Flash(c, "error", fmt.Sprintf("%q is not the id of one of the %s; nothing was added.", queueClip(raw, 40), many))
				return redirect(c, back)
			}
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		h.Sessions.Flash(c, "error", "Select at least one of the "+many+" first; nothing was added.")
		return redirect(c, back)
	}
	var (
		res     datasets.Added
		err     error
		created bool
	)
	name := strings.TrimSpace(form.Get("new_dataset_name"))
	switch picked := form.Get("dataset"); {
	case picked == "new" || picked == "" && name != "":
		// A new dataset, named here, created with the selection in it.
		if name == "" {
			h.Sessions.Flash(c, "error", "Name the new dataset; nothing was added.")
			return redirect(c, back)
		}
		typ := form.Get("new_dataset_type")
		if typ == "" {
			typ = datasets.TypesFor(kind)[0]
		}
		res, err = h.Datasets.CreateWithSelected(ctx(c), actor(c), CallerOf(c).OrgID,
			datasets.NewDataset{Type: typ, Settings: datasets.Settings{Name: name}}, kind, ids)
		created = true
	default:
		dsID, perr := uuid.Parse(picked)
		if perr != nil {
			h.Sessions.Flash(c, "error", "Pick the dataset to add the "+many+" to, or name a new one; nothing was added.")
			return redirect(c, back)
		}
		res, err = h.Datasets.AddSelected(ctx(c), actor(c), CallerOf(c).OrgID, dsID, kind, ids)
	}
	if msg, ok := refusal(err); ok {
		h.Sessions.Flash(c, "error", "Nothing was added: "+msg)
		return redirect(c, back)
	}
	if err != nil {
		return err
	}
	text := fmt.Sprintf("%s added to %s.", views.Count(res.Added, one, many), res.Dataset.Name)
	if created {
		text = fmt.Sprintf("%s added to the new dataset %s.", views.Count(res.Added, one, many), res.Dataset.Name)
	}
	if res.Already > 0 {
		text = fmt.Sprintf("%s added to %s (%s already in it).", views.Count(res.Added, one, many), res.Dataset.Name,
			views.Count(res.Already, "was", "were"))
	}
	h.Sessions.FlashLink(c, "ok", text, "/datasets/"+res.Dataset.ID.String(), "Open "+res.Dataset.Name)
	return redirect(c, back)
}

// refusal is a refused change in words: the first few field messages of
// invalid input, a conflict's message, or a dataset that is not there.
func refusal(err error) (string, bool) {
	var invalid *errs.Invalid
	var conflict *errs.Conflict
	switch {
	case errors.As(err, &invalid):
		var parts []string
		for i, f := range invalid.Errors {
			if i == 3 {
				parts = append(parts, fmt.Sprintf("and %d more", len(invalid.Errors)-3))
				break
			}
			parts = append(parts, f.Message)
		}
		return strings.Join(parts, "; ") + ".", true
	case errors.As(err, &conflict):
		return conflict.Message + ".", true
	case errors.Is(err, errs.ErrNotFound):
		return "that dataset is no longer there.", true
	}
	return "", false
}

func datasetChoices(rows []db.DatasetListOpenRow) []views.DatasetChoice {
	out := make([]views.DatasetChoice, len(rows))
	for i, r := range rows {
		out[i] = views.DatasetChoice{ID: r.ID.String(), Name: r.Name, Type: string(r.DatasetType)}
	}
	return out
}

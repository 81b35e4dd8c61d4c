package handlers

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/pairs"
)

// annotatorEmail converts the seed's annotator_email to Curate's
// annotator_id: the organisation's user with that address.
func (h *Handlers) annotatorEmail(c echo.Context, email *string, id **uuid.UUID) error {
	if email == nil {
		return nil
	}
	if *id != nil {
		return errs.InvalidField("annotator_email", "is the seed's name for annotator_id: send one of them")
	}
	v := &errs.Invalid{}
	if !v.Text("annotator_email", *email, 320, true) {
		return v
	}
	u, err := h.Accounts.UserByEmail(ctx(c), CallerOf(c).OrgID, strings.TrimSpace(*email))
	if errors.Is(err, errs.ErrNotFound) {
		return errs.InvalidField("annotator_email", "no user of this organisation has this e-mail address")
	}
	if err != nil {
		return err
	}
	*id = &u.ID
	return nil
}

// pairCreated is a new pair as POST /api/preference-pairs answers it: with
// the datasets it was added to, when the request named one.
type pairCreated struct {
	pairs.Object
	Datasets []pairDataset `json:"datasets,omitempty"`
}

type pairDataset struct {
	ID     uuid.UUID `json:"id"`
	Name   string    `json:"name"`
	Status string    `json:"status"`
}

// APIPairCreate stores one pair: 201 with it, 409 with the stored one when
// an identical pair exists. The seed's words are taken too: dataset_id
// adds the new pair to that dataset in the same step (the answer lists it
// under datasets), annotator_email names the annotator (annotator_id).
func (h *Handlers) APIPairCreate(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var body struct {
		pairs.Input
		DatasetID      *uuid.UUID `json:"dataset_id"`
		AnnotatorEmail *string    `json:"annotator_email"`
	}
	if err := decodeJSON(c, &body, ""); err != nil {
		return err
	}
	if err := h.annotatorEmail(c, body.AnnotatorEmail, &body.AnnotatorID); err != nil {
		return err
	}
	out := pairCreated{}
	var (
		p   db.PreferencePair
		err error
	)
	if body.DatasetID != nil {
		var d db.TrainingDataset
		p, d, err = h.Datasets.CreatePair(ctx(c), actor(c), CallerOf(c).OrgID, *body.DatasetID, body.Input)
		out.Datasets = []pairDataset{{ID: d.ID, Name: d.Name, Status: string(d.Status)}}
	} else {
		p, err = h.Pairs.Create(ctx(c), actor(c), CallerOf(c).OrgID, body.Input)
	}
	if err != nil {
		return conflictAs(annotatorField(err, body.AnnotatorEmail != nil), pairs.ToObject)
	}
	out.Object = pairs.ToObject(p)
	setETag(c, p.Version)
	return c.JSON(http.StatusCreated, out)
}

// annotatorField names a refused annotator as the request did.
func annotatorField(err error, byEmail bool) error {
	if !byEmail {
		return err
	}
	return renameFields(err, func(f string) string {
		if f == "annotator_id" {
			return "annotator_email"
		}
		return f
	})
}

// APIPairList lists pairs, newest first, with filters and a cursor, each
// pair whole as GET /api/preference-pairs/:id shows it; preview=1 cuts the
// long texts.
func (h *Handlers) APIPairList(c echo.Context) error {
	q, err := queryParams(c, slices.Concat(pairs.FilterParams, pageParams, []string{"preview"})...)
	if err != nil {
		return err
	}
	f, err := pairs.ParseFilter(q.Get)
	if err != nil {
		return err
	}
	limit, cursor, err := listPage(q, cursorIn(pairs.ListName))
	if err != nil {
		return err
	}
	short, err := wantPreview(q)
	if err != nil {
		return err
	}
	list, next, err := h.Pairs.ListObjects(ctx(c), CallerOf(c).OrgID, f, cursor, limit)
	if err != nil {
		return err
	}
	if short {
		for i := range list {
			p := &list[i]
			p.Query, p.ChosenResponse, p.RejectedResponse = preview(p.Query), preview(p.ChosenResponse), preview(p.RejectedResponse)
			p.SystemPrompt, p.AnnotationNotes = preview(p.SystemPrompt), preview(p.AnnotationNotes)
			for m := range p.Prompt {
				p.Prompt[m].Content = preview(p.Prompt[m].Content)
			}
		}
	}
	return listJSON(c, pairs.ListName, list, next)
}

// APIPairGet returns one pair.
func (h *Handlers) APIPairGet(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	d, err := h.Pairs.Get(ctx(c), CallerOf(c).OrgID, id)
	if err != nil {
		return err
	}
	setETag(c, d.Version)
	return c.JSON(http.StatusOK, pairs.ToObject(d.PreferencePair))
}

// APIPairPatch edits a pair. If-Match must carry the version the caller
// saw; a stale one answers 409 with the pair as it is now.
func (h *Handlers) APIPairPatch(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	version, err := ifMatch(c)
	if err != nil {
		return err
	}
	var body struct {
		pairs.Change
		AnnotatorEmail *string `json:"annotator_email"` // the seed's name for annotator_id
	}
	if err := decodeJSON(c, &body, ""); err != nil {
		return err
	}
	if err := h.annotatorEmail(c, body.AnnotatorEmail, &body.AnnotatorID); err != nil {
		return err
	}
	p, err := h.Pairs.Update(ctx(c), actor(c), CallerOf(c).OrgID, id, version, body.Change)
	if err != nil {
		return conflictAs(annotatorField(err, body.AnnotatorEmail != nil), pairs.ToObject)
	}
	setETag(c, p.Version)
	return c.JSON(http.StatusOK, pairs.ToObject(p))
}

// APIPairDelete deletes a pair; If-Match, when sent, must match.
func (h *Handlers) APIPairDelete(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	version, err := ifMatch(c)
	if err != nil {
		return err
	}
	if err := h.Pairs.Delete(ctx(c), actor(c), CallerOf(c).OrgID, id, version); err != nil {
		return conflictAs(err, pairs.ToObject)
	}
	return c.NoContent(http.StatusNoContent)
}

// APIPairBulk generates pairs from feedback: with "dry_run": true the
// counts and samples of what would be made, otherwise what was made.
func (h *Handlers) APIPairBulk(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var g pairs.Generation
	if err := decodeJSON(c, &g, ""); err != nil {
		return err
	}
	orgID := CallerOf(c).OrgID
	if g.DryRun {
		p, err := h.Pairs.Preview(ctx(c), orgID, g)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, p)
	}
	res, err := h.Pairs.Generate(ctx(c), actor(c), orgID, g)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

package handlers

import (
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/pairs"
)

// APIPairCreate stores one pair: 201 with it, 409 with the stored one when
// an identical pair exists.
func (h *Handlers) APIPairCreate(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in pairs.Input
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	p, err := h.Pairs.Create(ctx(c), actor(c), CallerOf(c).OrgID, in)
	if err != nil {
		return conflictAs(err, pairs.ToObject)
	}
	setETag(c, p.Version)
	return c.JSON(http.StatusCreated, pairs.ToObject(p))
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
	version, err := ifMatch(c, true)
	if err != nil {
		return err
	}
	var ch pairs.Change
	if err := decodeJSON(c, &ch, ""); err != nil {
		return err
	}
	p, err := h.Pairs.Update(ctx(c), actor(c), CallerOf(c).OrgID, id, version, ch)
	if err != nil {
		return conflictAs(err, pairs.ToObject)
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
	version, err := ifMatch(c, false)
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

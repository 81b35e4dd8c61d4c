package handlers

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/pairs"
)

// APIPairCreate stores one pair: 201 with it, 409 with the stored one when
// an identical pair exists.
func (h *Handlers) APIPairCreate(c echo.Context) error {
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

// APIPairList lists pairs, newest first, with filters and a cursor.
func (h *Handlers) APIPairList(c echo.Context) error {
	q := c.QueryParams()
	f, err := pairs.ParseFilter(q.Get)
	if err != nil {
		return err
	}
	limit, cursor, err := listPage(q, pairs.ParseCursor)
	if err != nil {
		return err
	}
	page, err := h.Pairs.List(ctx(c), CallerOf(c).OrgID, f, cursor, limit)
	if err != nil {
		return err
	}
	type row struct {
		ID                 string    `json:"id"`
		QueryPreview       string    `json:"query_preview"`
		ChosenPreview      string    `json:"chosen_preview"`
		RejectedPreview    string    `json:"rejected_preview"`
		PreferenceStrength float64   `json:"preference_strength"`
		Method             string    `json:"method"`
		ChosenFeedbackID   *string   `json:"chosen_feedback_id"`
		RejectedFeedbackID *string   `json:"rejected_feedback_id"`
		Tags               []string  `json:"tags"`
		CreatedAt          time.Time `json:"created_at"`
		Version            int32     `json:"version"`
	}
	out := struct {
		Data       []row  `json:"data"`
		NextCursor string `json:"next_cursor,omitempty"`
	}{Data: make([]row, len(page.Rows))}
	for i, r := range page.Rows {
		out.Data[i] = row{ID: r.ID.String(), QueryPreview: r.QueryPreview, ChosenPreview: r.ChosenPreview,
			RejectedPreview: r.RejectedPreview, PreferenceStrength: pairs.Strength(r.PreferenceStrength), Method: string(r.Method),
			Tags: r.Tags, CreatedAt: r.CreatedAt, Version: r.Version}
		if r.ChosenFeedbackID.Valid {
			s := r.ChosenFeedbackID.UUID.String()
			out.Data[i].ChosenFeedbackID = &s
		}
		if r.RejectedFeedbackID.Valid {
			s := r.RejectedFeedbackID.UUID.String()
			out.Data[i].RejectedFeedbackID = &s
		}
	}
	if page.Next != nil {
		out.NextCursor = page.Next.Encode()
	}
	return c.JSON(http.StatusOK, out)
}

// APIPairGet returns one pair.
func (h *Handlers) APIPairGet(c echo.Context) error {
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

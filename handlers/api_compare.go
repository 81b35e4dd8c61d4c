package handlers

import (
	"net/http"
	"net/url"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/compare"
	"github.com/curate/curate/internal/errs"
)

// compareParams are the query parameters of a comparison, on the API and
// the page alike.
var compareParams = []string{"a", "b", "golden_set_version_id", "filter"}

// compareRequest reads ?a=&b=&golden_set_version_id=&filter=; a malformed
// id is refused by its field.
func compareRequest(q url.Values) (compare.Request, error) {
	r := compare.Request{Filter: q.Get("filter")}
	bad := &errs.Invalid{}
	for _, f := range []struct {
		name string
		into *uuid.UUID
	}{{"a", &r.A}, {"b", &r.B}} {
		if s := q.Get(f.name); s != "" {
			id, err := uuid.Parse(s)
			if err != nil {
				bad.Add(f.name, "must be a model version's id")
			}
			*f.into = id
		}
	}
	if s := q.Get("golden_set_version_id"); s != "" {
		id, err := uuid.Parse(s)
		if err != nil {
			bad.Add("golden_set_version_id", "must be a golden set's version id")
		}
		r.GoldenSet = &id
	}
	return r, bad.Err()
}

// APIModelCompare sets two versions side by side: their evaluations on one
// golden set item by item, their training curves and their lineage.
func (h *Handlers) APIModelCompare(c echo.Context) error {
	q, err := queryParams(c, compareParams...)
	if err != nil {
		return err
	}
	r, err := compareRequest(q)
	if err != nil {
		return err
	}
	out, err := h.Compare.Compare(ctx(c), CallerOf(c).OrgID, r)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

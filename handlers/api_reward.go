package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/reward"
)

// APIRewardFormulaList lists every version of the organisation's reward
// formulas, each with its formula written out.
func (h *Handlers) APIRewardFormulaList(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	list, err := h.Reward.List(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listBody[reward.Version]{Data: list})
}

// APIRewardFormulaCreate writes a formula's next version: 201 with it.
func (h *Handlers) APIRewardFormulaCreate(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in reward.NewVersion
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	v, err := h.Reward.Create(ctx(c), actor(c), CallerOf(c).OrgID, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, v)
}

package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/bestofn"
	"github.com/curate/curate/internal/endpoints"
)

// APIEndpointList lists the organisation's chat endpoints, never their
// keys.
func (h *Handlers) APIEndpointList(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	list, err := h.Endpoints.List(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listBody[endpoints.Endpoint]{Data: list})
}

// APIEndpointCreate registers an OpenAI-compatible endpoint: 201 with it,
// without its key.
func (h *Handlers) APIEndpointCreate(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in endpoints.NewEndpoint
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	e, err := h.Endpoints.Create(ctx(c), actor(c), CallerOf(c).OrgID, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, e)
}

// APIBestOfN scores candidate answers to a query and returns the selected
// one, logged under its response id.
func (h *Handlers) APIBestOfN(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in bestofn.Request
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	out, err := h.BestOfN.Select(ctx(c), actor(c), CallerOf(c).OrgID, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// APIBestOfNGet reads a logged best-of-N answer with the feedback on it.
func (h *Handlers) APIBestOfNGet(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	out, err := h.BestOfN.Get(ctx(c), CallerOf(c).OrgID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

package handlers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/keyset"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/serving"
)

// APIModelList lists model versions, newest first, with ?name=, ?status=,
// ?alias=, ?limit= and ?cursor=.
func (h *Handlers) APIModelList(c echo.Context) error {
	q, err := queryParams(c, slices.Concat([]string{"name", "status", "alias"}, pageParams)...)
	if err != nil {
		return err
	}
	limit, cursor, err := listPage(q, cursorIn(models.ListName))
	if err != nil {
		return err
	}
	list, next, err := h.Models.List(ctx(c), CallerOf(c).OrgID,
		models.Filter{Name: q.Get("name"), Status: q.Get("status"), Alias: q.Get("alias")}, cursor, limit)
	if err != nil {
		return err
	}
	return listJSON(c, models.ListName, list, next)
}

// APIModelGet returns one version.
func (h *Handlers) APIModelGet(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	v, err := h.Models.Get(ctx(c), CallerOf(c).OrgID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

// APIModelRegister registers a model that exists elsewhere (the one in
// production today, a provider's model) as a new version: 201 with it.
func (h *Handlers) APIModelRegister(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in models.NewVersion
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	v, err := h.Models.Register(ctx(c), actor(c), CallerOf(c).OrgID, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, v)
}

// APIModelPatch changes a version's status, its number (while testing),
// and its registered model's description and tags.
func (h *Handlers) APIModelPatch(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var p models.Patch
	if err := decodeJSON(c, &p, ""); err != nil {
		return err
	}
	v, err := h.Models.Update(ctx(c), actor(c), CallerOf(c).OrgID, id, p)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

// APIModelHistory lists the history of the registered model a version
// belongs to, newest first.
func (h *Handlers) APIModelHistory(c echo.Context) error {
	q, err := queryParams(c, pageParams...)
	if err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	parse := func(s string) (int64, error) { return keyset.ParseSeq(models.HistoryListName, s) }
	limit, before, err := listPage(q, parse)
	if err != nil {
		return err
	}
	entries, next, err := h.Models.History(ctx(c), CallerOf(c).OrgID, id, before, limit)
	if err != nil {
		return err
	}
	out := listBody[models.HistoryEntry]{Data: entries}
	if next != 0 {
		out.NextCursor = keyset.EncodeSeq(models.HistoryListName, next)
	}
	return c.JSON(http.StatusOK, out)
}

// APIServingTargetCreate adds a serving target: 201 with it (never its
// key).
func (h *Handlers) APIServingTargetCreate(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in serving.NewTarget
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	t, err := h.Serving.Create(ctx(c), actor(c), CallerOf(c).OrgID, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, t)
}

// APIServingTargetList lists the organisation's serving targets.
func (h *Handlers) APIServingTargetList(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	list, err := h.Serving.List(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listBody[serving.Target]{Data: list})
}

// APIModelDeploy asks for a version to be deployed under an alias on a
// target: 202 with the deployment, which a worker carries out, or 200 with
// the existing one when the alias already holds the version there or its
// deployment is under way. {} (or no body) deploys to production on the
// one target that can take the version, recorded with the reason
// "via API".
func (h *Handlers) APIModelDeploy(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var in models.DeployRequest
	if err := decodeOptionalJSON(c, &in); err != nil {
		return err
	}
	in.Alias, in.Reason = apiDeployDefaults(in.Alias, in.Reason)
	d, err := h.Models.Deploy(ctx(c), actor(c), CallerOf(c).OrgID, id, in)
	if err != nil {
		return err
	}
	if d.Unchanged {
		return c.JSON(http.StatusOK, d)
	}
	return c.JSON(http.StatusAccepted, d)
}

// AliasFallback is what an admin sends to choose an alias's fallback.
type AliasFallback struct {
	Name     string `json:"name"`
	Alias    string `json:"alias"`
	Fallback string `json:"fallback"`
}

// APIModelAliasFallback sets what resolving an alias answers while its
// target does not list its version: "none" (503) or "last_healthy".
func (h *Handlers) APIModelAliasFallback(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in AliasFallback
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	if err := h.Models.SetFallback(ctx(c), actor(c), CallerOf(c).OrgID, in.Name, in.Alias, in.Fallback); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, in)
}

// APIModelRollback puts back the version that held an alias before the
// current one: 202 with the deployment that does it. {} (or no body) rolls
// production back, with the reason "via API".
func (h *Handlers) APIModelRollback(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var in models.RollbackRequest
	if err := decodeOptionalJSON(c, &in); err != nil {
		return err
	}
	in.Alias, in.Reason = apiDeployDefaults(in.Alias, in.Reason)
	d, err := h.Models.Rollback(ctx(c), actor(c), CallerOf(c).OrgID, id, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, d)
}

// APIReason is the reason recorded for a deployment or rollback the API
// asked for without one; the browser's forms ask a person for theirs.
const APIReason = "via API"

// apiDeployDefaults fills what a deploy or rollback through the API may
// leave out: the production alias, and the reason "via API".
func apiDeployDefaults(alias, reason string) (string, string) {
	if alias == "" {
		alias = "production"
	}
	if reason == "" {
		reason = APIReason
	}
	return alias, reason
}

// APIDeploymentGet reads a deployment.
func (h *Handlers) APIDeploymentGet(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	d, err := h.Models.GetDeployment(ctx(c), CallerOf(c).OrgID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

// APIModelResolve answers which version an alias names and where it is
// served, with an ETag over the answer so the assistant can poll with
// If-None-Match and get 304 until it changes.
func (h *Handlers) APIModelResolve(c echo.Context) error {
	q, err := queryParams(c, "name", "alias")
	if err != nil {
		return err
	}
	r, err := h.Models.Resolve(ctx(c), CallerOf(c).OrgID, q.Get("name"), q.Get("alias"))
	if err != nil {
		return err
	}
	body, err := json.Marshal(r)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:12]) + `"`
	c.Response().Header().Set("ETag", etag)
	c.Response().Header().Set("Cache-Control", "no-cache")
	if match := c.Request().Header.Get("If-None-Match"); match == etag {
		return c.NoContent(http.StatusNotModified)
	}
	return c.JSONBlob(http.StatusOK, body)
}

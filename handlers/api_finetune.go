package handlers

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/local"
)

// fineTuneObject is a job in the API's shape, its hyperparameters named as
// its provider names them.
func (h *Handlers) fineTuneObject(j db.FineTuningJob) finetune.Object {
	return finetune.ToObject(j, h.FineTune.Providers[j.Provider].Spelling)
}

// APIFineTuneLaunch launches a job on dataset_version_id, or on the newest
// frozen version of dataset_id: 201 with it, 422 naming each bad field as
// the request named it, or 422 on "budget" with the figures when it would
// overspend. Hyperparameters may use Curate's names or the provider's own
// (n_epochs at OpenAI, epochCount at Bedrock).
func (h *Handlers) APIFineTuneLaunch(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var body struct {
		DatasetID        string                     `json:"dataset_id"`
		DatasetVersionID string                     `json:"dataset_version_id"`
		Provider         string                     `json:"provider"`
		BaseModel        string                     `json:"base_model"`
		Method           string                     `json:"method"`
		Hyperparameters  map[string]json.RawMessage `json:"hyperparameters"`
		Suffix           string                     `json:"suffix"`
		RegisteredModel  string                     `json:"registered_model"`
		Seed             *int64                     `json:"seed"`
		Local            *local.Settings            `json:"local"` // the local provider's own settings
	}
	if err := decodeJSON(c, &body, ""); err != nil {
		return err
	}
	bad := &errs.Invalid{}
	req := finetune.Request{Provider: body.Provider, BaseModel: body.BaseModel, Method: provider.Method(body.Method),
		Suffix: body.Suffix, RegisteredModel: body.RegisteredModel, Seed: body.Seed, Local: body.Local}
	req.VersionID = optionalID(bad, "dataset_version_id", body.DatasetVersionID, "must be a dataset version id")
	req.DatasetID = optionalID(bad, "dataset_id", body.DatasetID, "must be a dataset id")
	spelling := h.FineTune.Providers[h.FineTune.Providers.Resolve(body.Provider)].Spelling
	hyper, sentAs, hyperErrs := provider.ParseHyperparameters(body.Hyperparameters, spelling)
	for _, fe := range hyperErrs {
		bad.Add(fe.Field, "%s", fe.Message)
	}
	if bad.Has() {
		return bad
	}
	req.Hyper = hyper
	job, est, err := h.FineTune.Launch(ctx(c), actor(c), CallerOf(c).OrgID, req)
	if err != nil {
		// Name each hyperparameter as the request spelt it.
		return renameFields(err, func(field string) string {
			if name, ok := sentAs[field]; ok {
				return "hyperparameters." + name
			}
			return field
		})
	}
	o := h.fineTuneObject(job)
	o.RequestedBaseModel = est.Request.RequestedModel
	return c.JSON(http.StatusCreated, o)
}

// optionalID parses an id field that may be left out; a malformed one is
// recorded in bad.
func optionalID(bad *errs.Invalid, field, s, message string) uuid.UUID {
	if s == "" {
		return uuid.Nil
	}
	id, err := uuid.Parse(s)
	if err != nil {
		bad.Add(field, "%s", message)
	}
	return id
}

// renameFields renames the fields of invalid input, so that messages name
// each field as the request did; other errors pass through.
func renameFields(err error, rename func(string) string) error {
	var inv *errs.Invalid
	if !errors.As(err, &inv) {
		return err
	}
	out := &errs.Invalid{}
	for _, fe := range inv.Errors {
		out.Add(rename(fe.Field), "%s", fe.Message)
	}
	return out
}

// APIFineTuneList lists jobs, newest first, with filters (status,
// provider, base_model, dataset_id) and a cursor.
func (h *Handlers) APIFineTuneList(c echo.Context) error {
	q, err := queryParams(c, slices.Concat(finetune.FilterParams, pageParams)...)
	if err != nil {
		return err
	}
	f, err := finetune.ParseFilter(q, h.FineTune.Providers)
	if err != nil {
		return err
	}
	limit, cursor, err := listPage(q, cursorIn(finetune.ListName))
	if err != nil {
		return err
	}
	page, err := h.FineTune.List(ctx(c), CallerOf(c).OrgID, f, cursor, limit)
	if err != nil {
		return err
	}
	out := make([]finetune.Object, len(page.Jobs))
	for i, j := range page.Jobs {
		out[i] = h.fineTuneObject(j)
	}
	return listJSON(c, finetune.ListName, out, page.Next)
}

// APIFineTuneGet returns a job with its status, progress, metrics and
// checkpoints.
func (h *Handlers) APIFineTuneGet(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	d, err := h.fineTuneDetail(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, finetune.DetailObject(d, h.FineTune.Providers[d.Job.Provider].Spelling))
}

// APIFineTuneCancel asks the provider to stop the job: 202 with the job,
// or 409 when it has already ended (and nothing is charged).
func (h *Handlers) APIFineTuneCancel(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	job, err := h.FineTune.Cancel(ctx(c), actor(c), CallerOf(c).OrgID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, h.fineTuneObject(job))
}

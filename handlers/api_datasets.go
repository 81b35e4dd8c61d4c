package handlers

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/errs"
)

// splitBody is a split configuration in a request.
type splitBody struct {
	Strategy          *string `json:"strategy"`
	ValidationPercent *int    `json:"validation_percent"`
	Seed              *int64  `json:"seed"`
}

// datasetBody is what POST and PATCH take; on PATCH only the fields sent
// change.
type datasetBody struct {
	Name         *string    `json:"name"`
	Description  *string    `json:"description"`
	DatasetType  *string    `json:"dataset_type"`
	SystemPrompt *string    `json:"system_prompt"`
	ExportFormat *string    `json:"export_format"`
	BaseModel    *string    `json:"base_model"`
	Split        *splitBody `json:"split"`
	Status       *string    `json:"status"`
	AgreedOnly   *bool      `json:"agreed_only"`
}

func (b datasetBody) apply(s *datasets.Settings) {
	set := func(dst *string, src *string) {
		if src != nil {
			*dst = *src
		}
	}
	set(&s.Name, b.Name)
	set(&s.Description, b.Description)
	set(&s.SystemPrompt, b.SystemPrompt)
	set(&s.ExportFormat, b.ExportFormat)
	set(&s.BaseModel, b.BaseModel)
	if b.AgreedOnly != nil {
		s.AgreedOnly = b.AgreedOnly
	}
	if b.Split != nil {
		set(&s.SplitStrategy, b.Split.Strategy)
		if b.Split.ValidationPercent != nil {
			s.ValidationPercent = *b.Split.ValidationPercent
		}
		if b.Split.Seed != nil {
			s.SplitSeed = *b.Split.Seed
		}
	}
}

// datasetDetailObject is GET /api/training-datasets/:id: the dataset with
// its versions and exports.
type datasetDetailObject struct {
	datasets.Object
	Versions []datasets.VersionObject `json:"versions"`
	Exports  []datasets.ExportObject  `json:"exports"`
}

func detailObject(d datasets.Detail) datasetDetailObject {
	out := datasetDetailObject{Object: datasets.ToObject(d.Dataset, d.MemberCount, d.Current, d.Exports),
		Versions: []datasets.VersionObject{}, Exports: []datasets.ExportObject{}}
	for _, v := range d.Versions {
		out.Versions = append(out.Versions, datasets.ToVersionObject(v))
	}
	for _, e := range d.Exports {
		out.Exports = append(out.Exports, datasets.ToExportObject(e))
	}
	return out
}

// APIDatasetCreate makes a draft dataset: 201 with it ("status" may be
// sent only as "draft"). The seed's
// feedback_ids, on an instruction_tuning dataset (the type that holds
// feedback items), adds those items as its first members in the same step:
// the dataset answers curating with them counted in sample_count, or,
// when one cannot be added, is not made.
func (h *Handlers) APIDatasetCreate(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var body struct {
		datasetBody
		FeedbackIDs []uuid.UUID `json:"feedback_ids"`
	}
	if err := decodeJSON(c, &body, ""); err != nil {
		return err
	}
	if body.Status != nil && *body.Status != string(db.DatasetStatusDraft) {
		return errs.InvalidField("status", "a new dataset starts as draft; change its status afterwards")
	}
	in := datasets.NewDataset{Settings: datasets.Settings{ValidationPercent: 20, SplitSeed: 42}, Members: body.FeedbackIDs}
	if body.DatasetType != nil {
		in.Type = *body.DatasetType
	}
	if len(body.FeedbackIDs) > 0 && in.Type != "" && datasets.KindOf(in.Type) != datasets.KindSFT {
		return errs.InvalidField("feedback_ids", "a %s dataset holds preference pairs, not feedback items: make an %s dataset of the items, "+
			"or add pairs with POST /api/training-datasets/ID/members", in.Type, datasets.TypeInstructionTuning)
	}
	body.apply(&in.Settings)
	caller := CallerOf(c)
	d, err := h.Datasets.Create(ctx(c), actor(c), caller.OrgID, in)
	if err != nil {
		return renameFields(err, func(f string) string {
			if rest, ok := strings.CutPrefix(f, "ids"); ok {
				return "feedback_ids" + rest
			}
			return f
		})
	}
	members := map[uuid.UUID]bool{}
	for _, id := range body.FeedbackIDs {
		members[id] = true
	}
	setETag(c, d.Version)
	return c.JSON(http.StatusCreated, datasets.ToObject(d, len(members), nil, nil))
}

// APIDatasetList lists datasets, newest first, with ?status=, ?type=,
// ?limit= and ?cursor=.
func (h *Handlers) APIDatasetList(c echo.Context) error {
	q, err := queryParams(c, slices.Concat(datasets.ListParams, pageParams)...)
	if err != nil {
		return err
	}
	f, err := datasets.ParseListFilter(q)
	if err != nil {
		return err
	}
	limit, cursor, err := listPage(q, cursorIn(datasets.ListName))
	if err != nil {
		return err
	}
	list, next, err := h.Datasets.ListObjects(ctx(c), CallerOf(c).OrgID, f, cursor, limit)
	if err != nil {
		return err
	}
	return listJSON(c, datasets.ListName, list, next)
}

// APIDatasetGet returns a dataset with its versions and exports.
func (h *Handlers) APIDatasetGet(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	d, err := h.Datasets.Get(ctx(c), CallerOf(c).OrgID, id)
	if err != nil {
		return err
	}
	setETag(c, d.Dataset.Version)
	return c.JSON(http.StatusOK, detailObject(d))
}

// APIDatasetPatch changes settings and, with "status", moves the dataset
// through its lifecycle ("ready" freezes a version). If-Match, when sent,
// must carry the version the caller saw.
func (h *Handlers) APIDatasetPatch(c echo.Context) error {
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
	body := datasetBody{}
	if err := decodeJSON(c, &body, ""); err != nil {
		return err
	}
	if body.DatasetType != nil {
		return errs.InvalidField("dataset_type", "cannot change; create a new dataset")
	}
	orgID := CallerOf(c).OrgID
	settings := body
	settings.Status = nil
	if settings != (datasetBody{}) {
		_, err := h.Datasets.Update(ctx(c), actor(c), orgID, id, version, body.apply)
		if err != nil {
			return conflictAs(err, func(d db.TrainingDataset) datasets.Object { return datasets.ToObject(d, 0, nil, nil) })
		}
	}
	if body.Status != nil {
		if _, err := h.Datasets.Transition(ctx(c), actor(c), orgID, id, *body.Status); err != nil {
			return err
		}
	}
	return h.APIDatasetGet(c)
}

// APIDatasetArchive archives a dataset (DELETE): its versions and exports
// stay.
func (h *Handlers) APIDatasetArchive(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if _, err := h.Datasets.Transition(ctx(c), actor(c), CallerOf(c).OrgID, id, datasets.StatusArchived); err != nil {
		return err
	}
	return h.APIDatasetGet(c)
}

// APIDatasetMembers adds members by id ("add"), by a filter ("filter":
// the pair filter or the feedback queue's, as string values), and removes
// them ("remove").
func (h *Handlers) APIDatasetMembers(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var body struct {
		Add    []uuid.UUID       `json:"add"`
		Remove []uuid.UUID       `json:"remove"`
		Filter map[string]string `json:"filter"`
	}
	if err := decodeJSON(c, &body, ""); err != nil {
		return err
	}
	if len(body.Add) == 0 && len(body.Remove) == 0 && body.Filter == nil {
		return errs.InvalidField("add", "send add, remove or filter")
	}
	orgID := CallerOf(c).OrgID
	out := struct {
		Added   int `json:"added"`
		Removed int `json:"removed"`
	}{}
	if len(body.Add) > 0 {
		if out.Added, err = h.Datasets.AddMembers(ctx(c), actor(c), orgID, id, body.Add); err != nil {
			return err
		}
	}
	if body.Filter != nil {
		q := url.Values{}
		for k, v := range body.Filter {
			q.Set(k, v)
		}
		n, err := h.Datasets.AddByFilter(ctx(c), actor(c), orgID, id, q)
		if err != nil {
			return err
		}
		out.Added += n
	}
	if len(body.Remove) > 0 {
		if out.Removed, err = h.Datasets.RemoveMembers(ctx(c), actor(c), orgID, id, body.Remove); err != nil {
			return err
		}
	}
	return c.JSON(http.StatusOK, out)
}

// APIDatasetValidation returns the validation report for ?format= (default
// the dataset's target) with PII masked unless ?mask_pii=false.
func (h *Handlers) APIDatasetValidation(c echo.Context) error {
	q, err := queryParams(c, "format", "mask_pii")
	if err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	r, err := h.Datasets.Report(ctx(c), CallerOf(c).OrgID, id, datasets.ReportRequest{Format: q.Get("format"), MaskPII: q.Get("mask_pii") != "false"})
	if err != nil {
		return err
	}
	out := struct {
		Source  string `json:"source"`
		Blocked bool   `json:"blocked"`
		Report  any    `json:"report"`
		// LeftOut counts the members left out because the dataset takes
		// agreed items only: disputed, or still awaiting reviews.
		LeftOut datasets.LeftOut `json:"left_out"`
	}{Source: r.Source, Blocked: r.Blocking(), Report: r.Report, LeftOut: r.LeftOut}
	return c.JSON(http.StatusOK, out)
}

// APIDatasetExport starts an export job: 202 with the export. No body,
// {} or no format exports in the dataset's own export_format; the seed's
// names jsonl, openai and anthropic stand for their formats
// (export.Aliases). Errors in the validation report answer 422, one entry
// per error code.
func (h *Handlers) APIDatasetExport(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var body struct {
		Format  string `json:"format"`
		MaskPII *bool  `json:"mask_pii"`
	}
	if err := decodeOptionalJSON(c, &body); err != nil {
		return err
	}
	e, err := h.startExport(c, id, body.Format, body.MaskPII == nil || *body.MaskPII)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, datasets.ToExportObject(e))
}

func (h *Handlers) startExport(c echo.Context, id uuid.UUID, format string, mask bool) (db.DatasetExport, error) {
	caller := CallerOf(c)
	e, _, err := h.Datasets.StartExport(ctx(c), actor(c), caller.OrgID, id,
		datasets.ExportRequest{Format: format, MaskPII: mask, Admin: caller.Role.AtLeast(auth.Admin)})
	return e, err
}

// APIDatasetExportGet returns one export with its progress and files.
func (h *Handlers) APIDatasetExportGet(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	e, err := h.exportOf(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, datasets.ToExportObject(e))
}

func (h *Handlers) exportOf(c echo.Context) (db.DatasetExport, error) {
	id, err := pathID(c)
	if err != nil {
		return db.DatasetExport{}, err
	}
	eid, err := uuid.Parse(c.Param("eid"))
	if err != nil {
		return db.DatasetExport{}, errs.ErrNotFound
	}
	return h.Datasets.Export(ctx(c), CallerOf(c).OrgID, id, eid)
}

// DatasetExportFile streams one file of a finished export through the app:
// the caller must be signed in to the dataset's organisation; there are no
// public links to the storage.
func (h *Handlers) DatasetExportFile(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	eid, err := uuid.Parse(c.Param("eid"))
	if err != nil {
		return errs.ErrNotFound
	}
	f, err := h.Datasets.OpenFile(ctx(c), CallerOf(c).OrgID, id, eid, c.Param("name"))
	if err != nil {
		return err
	}
	defer f.Close()
	hdr := c.Response().Header()
	hdr.Set(echo.HeaderContentType, f.ContentType)
	hdr.Set(echo.HeaderContentLength, strconv.FormatInt(f.Size, 10))
	hdr.Set(echo.HeaderContentDisposition, fmt.Sprintf("attachment; filename=%q", f.Name))
	hdr.Set("Cache-Control", "private, no-store")
	c.Response().WriteHeader(http.StatusOK)
	_, err = io.Copy(c.Response(), f)
	return err
}

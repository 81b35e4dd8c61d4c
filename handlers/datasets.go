package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/keyset"
	"github.com/curate/curate/views"
)

// membersShown is how many members the detail page lists.
const membersShown = 100

// reportInline is the largest dataset whose validation report the detail
// page runs without being asked.
const reportInline = 2000

// DatasetList is the Training Data Curation list.
func (h *Handlers) DatasetList(c echo.Context) error {
	on, err := h.Review.On(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	return h.renderDatasets(c, http.StatusOK, views.DatasetForm{AgreedOnly: on}, nil)
}

func (h *Handlers) renderDatasets(c echo.Context, status int, form views.DatasetForm, invalid *errs.Invalid) error {
	q := c.QueryParams()
	f, err := datasets.ParseListFilter(q)
	if err != nil {
		return err
	}
	cursor, err := keyset.Parse(datasets.ListName, q.Get("cursor"))
	if err != nil {
		return err
	}
	caller := CallerOf(c)
	rows, next, err := h.Datasets.List(ctx(c), caller.OrgID, f, cursor, 50)
	if err != nil {
		return err
	}
	v := views.DatasetsView{Status: f.Status, Type: f.Type, Statuses: datasets.Statuses, Types: datasets.Types,
		Formats: formatNames(export.Formats()), CanAct: caller.Role.AtLeast(auth.Curator), Form: form}
	if invalid != nil {
		v.Errors = invalid.ByField()
	}
	for _, r := range rows {
		row := views.DatasetRow{ID: r.TrainingDataset.ID.String(), Name: r.TrainingDataset.Name, Type: string(r.TrainingDataset.DatasetType),
			Status: string(r.TrainingDataset.Status), Samples: int(r.MemberCount), Version: "—", Quality: "—",
			Created: views.When(r.TrainingDataset.CreatedAt)}
		if r.VersionNumber > 0 {
			row.Version = fmt.Sprintf("v%d · %s", r.VersionNumber, views.Count(r.VersionItems, "item", "items"))
		}
		if r.TrainingDataset.QualityScore.Valid {
			row.Quality = fmt.Sprintf("%.2f", r.TrainingDataset.QualityScore.Float32)
		}
		v.Rows = append(v.Rows, row)
	}
	if next != nil {
		nq := url.Values{"cursor": {next.Encode(datasets.ListName)}}
		if f.Status != "" {
			nq.Set("status", f.Status)
		}
		if f.Type != "" {
			nq.Set("type", f.Type)
		}
		v.NextURL = "/datasets?" + nq.Encode()
	}
	return render(c, status, views.DatasetsPage(h.page(c, "Training datasets", "datasets"), v))
}

// DatasetCreate makes a dataset from the list page's form.
func (h *Handlers) DatasetCreate(c echo.Context) error {
	form := views.DatasetForm{Name: c.FormValue("name"), Type: c.FormValue("dataset_type"),
		Format: c.FormValue("export_format"), Description: c.FormValue("description"), AgreedOnly: c.FormValue("agreed_only") == "1"}
	d, err := h.Datasets.Create(ctx(c), actor(c), CallerOf(c).OrgID, datasets.NewDataset{Type: form.Type,
		Settings: datasets.Settings{Name: form.Name, Description: form.Description, ExportFormat: form.Format, ValidationPercent: 20, SplitSeed: 42,
			AgreedOnly: agreedOnlyForm(c)}})
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return h.renderDatasets(c, http.StatusUnprocessableEntity, form, invalid)
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "Created "+d.Name+". Add members, then mark it ready to freeze a version.")
	return redirect(c, "/datasets/"+d.ID.String())
}

// Dataset is one dataset's page, with the validation report for ?format=
// (default: the dataset's target format).
func (h *Handlers) Dataset(c echo.Context) error {
	return h.renderDataset(c, http.StatusOK, datasetTyped{})
}

// datasetTyped is what a refused form on the dataset's page held: shown
// again as typed, with the messages beside the fields.
type datasetTyped struct {
	invalid  *errs.Invalid
	settings *views.DatasetSettings // nil: the stored settings
	ids      string
}

func (h *Handlers) renderDataset(c echo.Context, status int, typed datasetTyped) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	caller := CallerOf(c)
	d, err := h.Datasets.Get(ctx(c), caller.OrgID, id)
	if err != nil {
		return err
	}
	members, err := h.Datasets.Members(ctx(c), id, membersShown)
	if err != nil {
		return err
	}
	ds := d.Dataset
	v := views.DatasetView{ID: ds.ID.String(), Name: ds.Name, Description: ds.Description, Type: string(ds.DatasetType),
		Kind: datasets.KindOf(string(ds.DatasetType)), Status: string(ds.Status), Samples: d.MemberCount, Curator: ds.CuratorLabel,
		Created: views.When(ds.CreatedAt), SavedFilter: ds.SavedFilter, Statuses: []string{"approved", "corrected"},
		Methods: datasets.PairMethods, Formats: formatNames(export.Formats()),
		FitFormats: formatNames(export.FormatsFor(export.Kind(datasets.KindOf(string(ds.DatasetType))))), CanAct: caller.Role.AtLeast(auth.Curator),
		IsAdmin: caller.Role.AtLeast(auth.Admin), CanExport: ds.Status == datasets.StatusReady || ds.Status == datasets.StatusExported,
		MoreMembers: d.MemberCount > len(members),
		Settings: views.DatasetSettings{Version: strconv.Itoa(int(ds.Version)), Name: ds.Name, Description: ds.Description,
			SystemPrompt: ds.SystemPrompt, Format: ds.ExportFormat, BaseModel: ds.BaseModel, Strategy: string(ds.SplitStrategy),
			ValidationPercent: strconv.Itoa(int(ds.ValidationPercent)), Seed: strconv.FormatInt(ds.SplitSeed, 10),
			Strategies: datasets.SplitStrategies, AgreedOnly: ds.AgreedOnly}}
	if typed.invalid != nil {
		v.Errors = typed.invalid.ByField()
	}
	if typed.settings != nil {
		typed.settings.Strategies = v.Settings.Strategies
		v.Settings = *typed.settings
	}
	v.IDs = typed.ids
	v.Actions = statusActions(string(ds.Status), d.MemberCount)
	for _, m := range members {
		url := "/feedback/" + m.ID.String()
		if m.Source == "pair" {
			url = "/pairs/" + m.ID.String()
		}
		v.Members = append(v.Members, views.MemberRow{ID: m.ID.String(), URL: url, Source: m.Source, Query: m.Query, Reply: m.Reply,
			Detail: m.Detail, Added: views.When(m.AddedAt)})
	}
	jobs := map[uuid.UUID][]views.VersionJob{}
	for _, j := range d.Jobs {
		label := views.Label(j.Provider) + " · " + j.BaseModel
		if j.Suffix != "" {
			label += " · " + j.Suffix
		}
		jobs[j.DatasetVersionID] = append(jobs[j.DatasetVersionID], views.VersionJob{URL: "/fine-tuning/jobs/" + j.ID.String(),
			Label: label, Status: j.Status, Started: views.When(j.CreatedAt)})
	}
	for _, ver := range d.Versions {
		v.Versions = append(v.Versions, views.VersionRow{ID: ver.ID.String(), Number: strconv.Itoa(int(ver.Number)), Hash: ver.ContentHash,
			Items: int(ver.ItemCount), Train: int(ver.TrainCount), Validation: int(ver.ValidationCount),
			Split:   fmt.Sprintf("%s, %d%% validation, seed %d", ver.SplitStrategy, ver.ValidationPercent, ver.SplitSeed),
			Created: views.When(ver.CreatedAt), Current: d.Current != nil && d.Current.ID == ver.ID, Jobs: jobs[ver.ID]})
	}
	for _, e := range d.Exports {
		row := exportRow(e)
		if !v.CanAct {
			row.Files = nil // downloads are for curators and admins
		}
		v.Exports = append(v.Exports, row)
	}
	// A report reads every example and counts its tokens: large datasets
	// are checked when asked (the "Check" button), small ones right away.
	if d.MemberCount > 0 && (c.QueryParam("format") != "" || d.MemberCount <= reportInline) {
		r, err := h.Datasets.Report(ctx(c), caller.OrgID, id, datasets.ReportRequest{Format: c.QueryParam("format"), MaskPII: true})
		if err != nil {
			return err
		}
		v.Report = reportView(r)
	}
	v.Loop = h.loopOrigin(c, "dataset_id", ds.ID.String())
	return render(c, status, views.DatasetPage(h.page(c, ds.Name, "datasets"), v))
}

// statusActions are the lifecycle buttons from a status.
func statusActions(status string, members int) []views.StatusAction {
	var out []views.StatusAction
	for _, to := range datasets.Statuses {
		if !datasets.CanTransition(status, to) || to == datasets.StatusExported {
			continue
		}
		a := views.StatusAction{To: to}
		switch to {
		case datasets.StatusDraft:
			a.Label = "Back to draft"
		case datasets.StatusCurating:
			a.Label = "Start curating"
			if status == datasets.StatusReady || status == datasets.StatusExported {
				a.Label = "Edit (starts a new version)"
			}
		case datasets.StatusReady:
			if members == 0 {
				continue
			}
			a.Label = "Mark ready (freeze a version)"
		case datasets.StatusArchived:
			a.Label, a.Danger = "Archive", true
		}
		out = append(out, a)
	}
	return out
}

func exportRow(e db.DatasetExport) views.ExportRow {
	r := views.ExportRow{ID: e.ID.String(), DatasetID: e.DatasetID.String(), Format: e.Format, Status: string(e.Status),
		Done: int(e.RowsDone), Total: int(e.RowsTotal), Masked: e.MaskPii, Error: e.Error, Created: views.When(e.CreatedAt),
		By: e.CreatedByLabel, Polling: e.Status == db.ExportStatusQueued || e.Status == db.ExportStatusRunning}
	for _, name := range datasets.FileNames(e) {
		r.Files = append(r.Files, views.FileLink{Name: name, URL: datasets.FileURL(e, name)})
	}
	return r
}

func reportView(r datasets.Report) *views.ReportView {
	rv := &views.ReportView{Format: string(r.Format), Source: r.Source, Blocked: r.Blocking(), Examples: r.Examples,
		WithErrors: r.ExamplesWithErrors, WithWarnings: r.ExamplesWithWarnings, Errors: r.Errors, Warnings: r.Warnings,
		Quality: fmt.Sprintf("%.3f", r.QualityScore), Formula: r.QualityFormula, TotalTokens: r.TotalTokens,
		TokensMean: fmt.Sprintf("%.0f", r.Tokens.Mean), TokensMax: r.Tokens.Max, Billed: r.EstimatedBilledTokens,
		Epochs: r.Epochs, ContextLimit: r.ContextLimit, LeftOutDisputed: r.LeftOut.Disputed, LeftOutOpen: r.LeftOut.Open,
		Methods: []string{"Exact duplicates: " + r.DuplicateMethod, "Near duplicates: " + r.NearDuplicateMethod, "Length outliers: " + r.OutlierMethod}}
	for _, f := range r.Findings {
		row := views.FindingRow{Code: f.Code, Severity: string(f.Severity), Count: f.Count}
		for i, s := range f.Samples {
			if i == 3 {
				break
			}
			row.Samples = append(row.Samples, s.Message)
		}
		rv.Findings = append(rv.Findings, row)
	}
	return rv
}

func formatNames(formats []export.Format) []string {
	var out []string
	for _, f := range formats {
		out = append(out, string(f))
	}
	return out
}

// DatasetUpdate saves the settings form.
func (h *Handlers) DatasetUpdate(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	version, _ := strconv.Atoi(c.FormValue("version"))
	typed := &views.DatasetSettings{Version: c.FormValue("version"), Name: c.FormValue("name"), Description: c.FormValue("description"),
		SystemPrompt: c.FormValue("system_prompt"), Format: c.FormValue("export_format"), BaseModel: c.FormValue("base_model"),
		Strategy: c.FormValue("split_strategy"), ValidationPercent: c.FormValue("validation_percent"), Seed: c.FormValue("split_seed"),
		AgreedOnly: c.FormValue("agreed_only") == "1"}
	v := &errs.Invalid{}
	percent, err := strconv.Atoi(c.FormValue("validation_percent"))
	if err != nil {
		v.Add("validation_percent", "must be a whole number from 0 to 50")
	}
	seed, err := strconv.ParseInt(c.FormValue("split_seed"), 10, 64)
	if err != nil {
		v.Add("split_seed", "must be a whole number")
	}
	if v.Has() {
		return h.renderDataset(c, http.StatusUnprocessableEntity, datasetTyped{invalid: v, settings: typed})
	}
	_, err = h.Datasets.Update(ctx(c), actor(c), CallerOf(c).OrgID, id, int32(version), func(s *datasets.Settings) {
		s.Name, s.Description, s.SystemPrompt = c.FormValue("name"), c.FormValue("description"), c.FormValue("system_prompt")
		s.ExportFormat, s.BaseModel, s.SplitStrategy = c.FormValue("export_format"), c.FormValue("base_model"), c.FormValue("split_strategy")
		s.ValidationPercent, s.SplitSeed = percent, seed
		if on := agreedOnlyForm(c); on != nil {
			s.AgreedOnly = on
		}
	})
	if errors.As(err, &v) {
		return h.renderDataset(c, http.StatusUnprocessableEntity, datasetTyped{invalid: v, settings: typed})
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "Settings saved.")
	return redirect(c, "/datasets/"+id.String())
}

// DatasetStatus moves the dataset through its lifecycle; "ready" freezes.
func (h *Handlers) DatasetStatus(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	to := c.FormValue("to")
	if to == datasets.StatusReady {
		ver, err := h.Datasets.Freeze(ctx(c), actor(c), CallerOf(c).OrgID, id)
		if err != nil {
			return h.flashError(c, id, err)
		}
		h.Sessions.Flash(c, "ok", fmt.Sprintf("Ready: version %d frozen, %s, sha256 %s.", ver.Number, views.Count(ver.ItemCount, "item", "items"), ver.ContentHash))
		return redirect(c, "/datasets/"+id.String())
	}
	if _, err := h.Datasets.Transition(ctx(c), actor(c), CallerOf(c).OrgID, id, to); err != nil {
		return h.flashError(c, id, err)
	}
	h.Sessions.Flash(c, "ok", "The dataset is now "+to+".")
	return redirect(c, "/datasets/"+id.String())
}

// flashError shows a refused action's reason on the dataset's page;
// anything but invalid input and conflicts goes to the error handler.
func (h *Handlers) flashError(c echo.Context, id uuid.UUID, err error) error {
	var invalid *errs.Invalid
	var conflict *errs.Conflict
	switch {
	case errors.As(err, &invalid):
		var parts []string
		for _, f := range invalid.Errors {
			// A blocking check's field is "report.<code>": its label reads.
			field, _ := strings.CutPrefix(f.Field, "report.")
			parts = append(parts, views.Label(field)+": "+f.Message)
		}
		h.Sessions.Flash(c, "error", strings.Join(parts, "; "))
	case errors.As(err, &conflict):
		h.Sessions.Flash(c, "error", conflict.Message)
	default:
		return err
	}
	return redirect(c, "/datasets/"+id.String())
}

// DatasetMembersAdd adds members by the ids typed or pasted in the form.
func (h *Handlers) DatasetMembersAdd(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	typed := c.FormValue("ids")
	ids, err := parseIDs(typed)
	if err == nil {
		var n int
		if n, err = h.Datasets.AddMembers(ctx(c), actor(c), CallerOf(c).OrgID, id, ids); err == nil {
			h.Sessions.Flash(c, "ok", "Added "+views.Count(n, "member", "members")+".")
			return redirect(c, "/datasets/"+id.String())
		}
	}
	// A refused list stays in the box, its problems beside it.
	if msg, ok := refusal(err); ok {
		invalid := &errs.Invalid{}
		invalid.Add("ids", "%s", msg)
		return h.renderDataset(c, http.StatusUnprocessableEntity, datasetTyped{invalid: invalid, ids: typed})
	}
	return err
}

// DatasetMembersFilter adds every item the filter form matches.
func (h *Handlers) DatasetMembersFilter(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	form, err := c.FormParams()
	if err != nil {
		return err
	}
	q := url.Values{}
	for k, vs := range form {
		if k != "_csrf" && len(vs) > 0 && vs[0] != "" {
			q.Set(k, vs[0])
		}
	}
	n, err := h.Datasets.AddByFilter(ctx(c), actor(c), CallerOf(c).OrgID, id, q)
	if err != nil {
		return h.flashError(c, id, err)
	}
	h.Sessions.Flash(c, "ok", "Added "+views.Count(n, "member", "members")+" matching the filter.")
	return redirect(c, "/datasets/"+id.String())
}

// DatasetMembersRemove removes the checked members.
func (h *Handlers) DatasetMembersRemove(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	form, err := c.FormParams()
	if err != nil {
		return err
	}
	ids, err := parseIDs(strings.Join(form["ids"], ","))
	if err != nil {
		return h.flashError(c, id, err)
	}
	n, err := h.Datasets.RemoveMembers(ctx(c), actor(c), CallerOf(c).OrgID, id, ids)
	if err != nil {
		return h.flashError(c, id, err)
	}
	h.Sessions.Flash(c, "ok", "Removed "+views.Count(n, "member", "members")+".")
	return redirect(c, "/datasets/"+id.String())
}

// parseIDs reads ids separated by commas, spaces or new lines.
func parseIDs(s string) ([]uuid.UUID, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
	if len(fields) == 0 {
		return nil, errs.InvalidField("ids", "enter at least one id")
	}
	if len(fields) > datasets.MaxIDs {
		return nil, errs.InvalidField("ids", "at most %d at once", datasets.MaxIDs)
	}
	out := make([]uuid.UUID, 0, len(fields))
	for i, f := range fields {
		id, err := uuid.Parse(f)
		if err != nil {
			return nil, errs.InvalidField(fmt.Sprintf("ids[%d]", i), "%q is not an id", f)
		}
		out = append(out, id)
	}
	return out, nil
}

// DatasetExportStart starts an export from the page's form.
func (h *Handlers) DatasetExportStart(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	e, err := h.startExport(c, id, c.FormValue("format"), c.FormValue("keep_pii") != "1")
	if err != nil {
		return h.flashError(c, id, err)
	}
	h.Sessions.Flash(c, "ok", fmt.Sprintf("Exporting %s to %s.", views.Count(e.RowsTotal, "example", "examples"), views.Label(string(e.Format))))
	return redirect(c, "/datasets/"+id.String()+"#exports")
}

// DatasetExportRow is one export's row, polled while it runs; a plain
// visit goes to the dataset's page.
func (h *Handlers) DatasetExportRow(c echo.Context) error {
	e, err := h.exportOf(c)
	if err != nil {
		return err
	}
	if c.Request().Header.Get("HX-Request") != "true" {
		return c.Redirect(http.StatusSeeOther, "/datasets/"+e.DatasetID.String()+"#exports")
	}
	return render(c, http.StatusOK, views.ExportRowFragment(exportRow(e)))
}

// agreedOnlyForm reads a dataset form's "agreed items only" box: nil when
// the form did not show it (the setting stays, or takes its default).
func agreedOnlyForm(c echo.Context) *bool {
	if c.FormValue("agreed_only_shown") != "1" {
		return nil
	}
	on := c.FormValue("agreed_only") == "1"
	return &on
}

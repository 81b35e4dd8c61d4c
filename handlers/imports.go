package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/imports"
	"github.com/curate/curate/views"
)

// recentRuns is how many import runs the page lists.
const recentRuns = 50

// ImportList lists recent import runs with the upload form.
func (h *Handlers) ImportList(c echo.Context) error {
	return h.renderImports(c, http.StatusOK, views.ImportsView{Kind: imports.KindJSONL})
}

func (h *Handlers) renderImports(c echo.Context, status int, v views.ImportsView) error {
	runs, err := h.Imports.Runs(ctx(c), CallerOf(c).OrgID, recentRuns)
	if err != nil {
		return err
	}
	for _, r := range runs {
		v.Runs = append(v.Runs, runRow(r))
	}
	v.FeedbackKinds, v.PairKinds, v.MaxUploadMiB = imports.FeedbackKinds, imports.PairKinds, imports.MaxUpload>>20
	return render(c, status, views.ImportsPage(h.page(c, "Imports", "imports"), v))
}

// ImportCreate keeps an uploaded file and queues its import.
func (h *Handlers) ImportCreate(c echo.Context) error {
	kind := c.FormValue("kind")
	fh, err := c.FormFile("file")
	if errors.Is(err, http.ErrMissingFile) {
		return h.renderImports(c, http.StatusUnprocessableEntity, views.ImportsView{Kind: kind, Errors: map[string]string{"file": "choose a file to import"}})
	}
	if err != nil {
		return err
	}
	f, err := fh.Open()
	if err != nil {
		return err
	}
	defer f.Close()
	run, err := h.Imports.Start(ctx(c), actor(c), imports.NewRun{OrgID: CallerOf(c).OrgID, Kind: kind, FileName: fh.Filename, Body: f})
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return h.renderImports(c, http.StatusUnprocessableEntity, views.ImportsView{Kind: kind, Errors: invalid.ByField()})
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "Importing "+run.FileName+". The list below shows its progress.")
	return redirect(c, "/imports")
}

// ImportRunRow is one run's row, polled by the page while the run is active.
func (h *Handlers) ImportRunRow(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	run, err := h.Imports.GetRun(ctx(c), CallerOf(c).OrgID, id)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.ImportRunRowView(runRow(run)))
}

func runRow(r db.ImportRun) views.ImportRunRow {
	row := views.ImportRunRow{
		ID: r.ID.String(), Kind: r.Kind, FileName: r.FileName, Size: byteSize(r.FileSize), Status: r.Status, Phase: r.Phase,
		CreatedAt: views.When(r.CreatedAt), CreatedBy: r.CreatedByLabel, Total: 2 * r.FileSize, Done: r.BytesDone,
		Active: r.Status == imports.StatusQueued || r.Status == imports.StatusRunning,
		Stored: int(r.Stored), Duplicates: int(r.Duplicates), Skipped: int(r.Skipped), Reasons: reasons(r.SkipReasons), Error: r.Error,
	}
	switch {
	case r.Status == imports.StatusSucceeded:
		row.Done = row.Total
	case r.Phase == imports.PhaseStoring:
		row.Done += r.FileSize // the checking pass is behind it
	}
	return row
}

// reasons turns the stored reason -> count object into a list, most first.
func reasons(raw []byte) []views.CountedReason {
	var m map[string]int
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	out := make([]views.CountedReason, 0, len(m))
	for r, n := range m {
		out = append(out, views.CountedReason{Reason: r, Count: n})
	}
	slices.SortFunc(out, func(a, b views.CountedReason) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Reason, b.Reason)
	})
	return out
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// Langfuse shows the organisation's Langfuse connection, and to admins the
// form that changes it.
func (h *Handlers) Langfuse(c echo.Context) error {
	return h.renderLangfuse(c, http.StatusOK, nil, nil)
}

func (h *Handlers) langfuseView(c echo.Context) (views.LangfuseView, error) {
	caller := CallerOf(c)
	v := views.LangfuseView{CanEdit: caller.Role.AtLeast(auth.Admin)}
	conn, err := h.Imports.Connection(ctx(c), caller.OrgID)
	if errors.Is(err, errs.ErrNotFound) {
		return v, nil
	}
	if err != nil {
		return v, err
	}
	v.Connected, v.Host, v.PublicKey, v.Syncing = true, conn.Host, conn.PublicKey, conn.SyncStartedAt != nil
	v.LastSync = views.WhenPtr(conn.LastSyncAt)
	if conn.LastAttemptAt != nil {
		v.LastAttempt = views.When(*conn.LastAttemptAt)
	}
	v.LastStored, v.LastDuplicates, v.LastSkipped = int(conn.LastStored), int(conn.LastDuplicates), int(conn.LastSkipped)
	v.TotalStored, v.Reasons, v.LastError = conn.TotalStored, reasons(conn.LastSkipReasons), conn.LastError
	v.Form = views.LangfuseForm{Host: conn.Host, PublicKey: conn.PublicKey}
	return v, nil
}

// renderLangfuse renders the page; form and fieldErrs, when set, replace
// the form's values with what was submitted and its messages.
func (h *Handlers) renderLangfuse(c echo.Context, status int, form *views.LangfuseForm, fieldErrs map[string]string) error {
	v, err := h.langfuseView(c)
	if err != nil {
		return err
	}
	if form != nil {
		v.Form = *form
	}
	v.Errors = fieldErrs
	// The page has a secret field: never cache it.
	c.Response().Header().Set("Cache-Control", "no-store")
	return render(c, status, views.LangfusePage(h.page(c, "Langfuse", "imports"), v))
}

// LangfuseStatus is the connection's card, polled while a sync runs.
func (h *Handlers) LangfuseStatus(c echo.Context) error {
	v, err := h.langfuseView(c)
	if err != nil {
		return err
	}
	if !v.Connected {
		return errs.ErrNotFound
	}
	return render(c, http.StatusOK, views.LangfuseStatus(views.Page{CSRF: CSRFToken(c)}, v))
}

// LangfuseSave creates or changes the connection, then tests it.
func (h *Handlers) LangfuseSave(c echo.Context) error {
	form := views.LangfuseForm{Host: c.FormValue("host"), PublicKey: c.FormValue("public_key")}
	in := imports.ConnectionInput{Host: form.Host, PublicKey: form.PublicKey, SecretKey: c.FormValue("secret_key")}
	orgID := CallerOf(c).OrgID
	_, err := h.Imports.SaveConnection(ctx(c), actor(c), orgID, in)
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return h.renderLangfuse(c, http.StatusUnprocessableEntity, &form, invalid.ByField())
	}
	if err != nil {
		return err
	}
	var fail *imports.LangfuseError
	switch err := h.Imports.TestConnection(ctx(c), orgID); {
	case errors.As(err, &fail):
		h.Sessions.Flash(c, "error", "Saved, but Langfuse did not answer as expected. "+fail.Error())
	case err != nil:
		return err
	default:
		h.Sessions.Flash(c, "ok", "Saved. Langfuse accepted the keys.")
	}
	return redirect(c, "/imports/langfuse")
}

// LangfuseTest checks that Langfuse answers with the stored keys.
func (h *Handlers) LangfuseTest(c echo.Context) error {
	err := h.Imports.TestConnection(ctx(c), CallerOf(c).OrgID)
	var fail *imports.LangfuseError
	switch {
	case errors.As(err, &fail):
		h.Sessions.Flash(c, "error", "The connection does not work. "+fail.Error())
	case err != nil:
		return err
	default:
		h.Sessions.Flash(c, "ok", "The connection works: Langfuse accepted the keys.")
	}
	return redirect(c, "/imports/langfuse")
}

// LangfuseSyncNow queues a sync at once.
func (h *Handlers) LangfuseSyncNow(c echo.Context) error {
	queued, err := h.Imports.RequestSync(ctx(c), actor(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	if !queued {
		h.Sessions.Flash(c, "info", "A sync is already waiting or running, so no other was queued. If you have just changed the keys, ask again when it ends.")
		return redirect(c, "/imports/langfuse")
	}
	h.Sessions.Flash(c, "ok", "A sync is queued; this page shows its result when it ends.")
	return redirect(c, "/imports/langfuse")
}

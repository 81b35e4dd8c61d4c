package handlers

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"golang.org/x/sync/errgroup"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/keyset"
	"github.com/curate/curate/views"
)

// QueuePageSize is how many items one page of the queue shows.
const QueuePageSize = 50

// bulkPreviewSize is how many items a bulk confirmation lists.
const bulkPreviewSize = 5

// FeedbackQueue is the Curate tab's queue: filters from the URL, counts per
// status, one keyset page of items and the bulk-action form.
func (h *Handlers) FeedbackQueue(c echo.Context) error {
	caller := CallerOf(c)
	params := c.QueryParams()
	f, err := queueFilter(c, params)
	if err != nil {
		return err
	}
	cursor, err := keyset.Parse(feedback.ListName, params.Get("cursor"))
	if err != nil {
		return err
	}
	// The page, the assignee list, the model list and the layout (its alert
	// banners) are independent reads: run them at once so the page waits for
	// the slowest, not their sum. Only the layout's goroutine touches c until
	// Wait returns.
	var (
		page   feedback.Page
		users  []db.User
		models []string
		layout views.Page
	)
	g, gctx := errgroup.WithContext(ctx(c))
	g.Go(func() error { layout = h.page(c, "Feedback queue", "queue"); return nil })
	g.Go(func() (err error) {
		page, err = h.Feedback.List(gctx, caller.OrgID, f, cursor, QueuePageSize)
		return err
	})
	g.Go(func() (err error) { users, err = h.Accounts.ListUsers(gctx, caller.OrgID); return err })
	g.Go(func() (err error) { models, err = h.Feedback.Models(gctx, caller.OrgID); return err })
	var open []db.DatasetListOpenRow
	if caller.Role.AtLeast(auth.Curator) {
		g.Go(func() (err error) { open, err = h.Datasets.Open(gctx, caller.OrgID, datasets.KindSFT); return err })
	}
	if err := g.Wait(); err != nil {
		return err
	}

	filterQuery := f.Values()
	itemQuery := queueCloneQuery(filterQuery)
	if cursor != nil {
		itemQuery.Set("cursor", cursor.Encode(feedback.ListName))
	}
	mine := queueCloneQuery(filterQuery)
	mine.Set("assignee", caller.UserID.String())
	all := queueCloneQuery(filterQuery)
	all.Del("assignee")
	v := views.QueueView{
		Filter:      queueFilterForm(f),
		ItemQuery:   itemQuery.Encode(),
		FilterQuery: filterQuery.Encode(),
		MyQueueURL:  feedbackQueueURL(mine),
		AllURL:      feedbackQueueURL(all),
		Mine:        caller.UserID != uuid.Nil && f.Assignee == caller.UserID,
		Statuses:    feedback.Statuses, Types: feedback.Types, Sources: feedback.Sources,
		Models:    models,
		CanAct:    caller.Role.AtLeast(auth.Curator),
		Counts:    queueStatusTabs(f, nil),
		CountsURL: "/feedback/counts" + withPrefix("?", filterQuery.Encode()),
		Datasets:  datasetChoices(open),
	}
	v.NewDataset = views.NewDatasetChoice{Types: datasets.TypesFor(datasets.KindSFT)}
	for _, u := range users {
		// A viewer reviews nothing, so is nobody's assignee.
		if u.Active && u.Role != db.UserRoleViewer {
			v.Users = append(v.Users, views.QueueOption{Value: u.ID.String(), Label: u.Email})
		}
	}
	for _, r := range page.Rows {
		v.Rows = append(v.Rows, queueRow(r, itemQuery.Encode()))
	}
	if page.Next != nil {
		next := queueCloneQuery(filterQuery)
		next.Set("cursor", page.Next.Encode(feedback.ListName))
		v.NextURL = feedbackQueueURL(next)
	}
	if cursor != nil {
		v.FirstURL = feedbackQueueURL(filterQuery)
	}
	return render(c, http.StatusOK, views.QueuePage(layout, v))
}

// FeedbackCounts is the queue's status tabs with the number of items under
// each, for the filter in the URL; the queue page loads it after itself.
func (h *Handlers) FeedbackCounts(c echo.Context) error {
	f, err := queueFilter(c, c.QueryParams())
	if err != nil {
		return err
	}
	counts, err := h.Feedback.StatusCounts(ctx(c), CallerOf(c).OrgID, f)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.QueueCounts(queueStatusTabs(f, counts)))
}

// queueStatusTabs makes the status tabs: "all" and one per status, each a
// link that keeps the other filters; with rows, each carries its count.
func queueStatusTabs(f feedback.Filter, rows []db.FeedbackCountByStatusRow) []views.QueueStatusCount {
	byStatus := map[string]int64{}
	var total int64
	for _, r := range rows {
		byStatus[string(r.Status)] = r.Count
		total += r.Count
	}
	known := rows != nil
	link := func(status string) string {
		g := f
		g.Status = status
		return feedbackQueueURL(g.Values())
	}
	out := []views.QueueStatusCount{{Status: "", Label: "All", Count: total, Known: known, URL: link(""), Active: f.Status == ""}}
	for _, s := range feedback.Statuses {
		out = append(out, views.QueueStatusCount{Status: s, Label: views.Label(s), Count: byStatus[s], Known: known,
			URL: link(s), Active: f.Status == s})
	}
	return out
}

func queueFilterForm(f feedback.Filter) views.QueueFilter {
	q := f.Values()
	return views.QueueFilter{
		Status: q.Get("status"), Type: q.Get("type"), Source: q.Get("source"), RatingMin: q.Get("rating_min"),
		RatingMax: q.Get("rating_max"), DimBelow: q.Get("dim_below"), Tag: q.Get("tag"), Model: q.Get("model"),
		Assignee: q.Get("assignee"), From: q.Get("from"), To: q.Get("to"), Q: q.Get("q"),
		Duplicates: f.WithDuplicates, PII: f.PIIOnly, Safety: f.Safety, Since: q.Get("since"), Until: q.Get("until"),
	}
}

func queueRow(r db.FeedbackListRow, itemQuery string) views.QueueRow {
	return views.QueueRow{
		ID: r.ID.String(), URL: feedbackItemURL(r.ID.String(), itemQuery), Version: strconv.Itoa(int(r.Version)),
		Query: r.QueryPreview, Response: r.ResponsePreview, Model: r.Model, Type: string(r.FeedbackType),
		Rating: smallIntText(r.Rating.Int16, r.Rating.Valid), Dims: queueDimsSummary(r.DimAccuracy, r.DimHelpfulness, r.DimClarity, r.DimSafety),
		Status: string(r.Status), Source: string(r.Source), Tags: r.Tags, PII: r.PiiKinds, Duplicate: r.DuplicateOf.Valid,
		HasCorrection: r.HasCorrection, Assigned: r.AssigneeID.Valid, Created: views.When(r.CreatedAt),
	}
}

// queueURL is the queue's address for a query; the query is built from
// parsed values, so it can only point at the queue.
func feedbackQueueURL(q url.Values) string {
	if len(q) == 0 {
		return "/feedback"
	}
	return "/feedback?" + q.Encode()
}

// feedbackItemURL is an item's page with the queue's filter and page kept
// in the queue's own parameters.
func feedbackItemURL(id, queueQuery string) string {
	return "/feedback/" + id + withPrefix("?", queueQuery)
}

// queueQueryParam reads a queue's query string posted in a form field,
// keeping only what parses as a filter and a cursor.
func queueQueryParam(raw string) string {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return ""
	}
	f, err := feedback.ParseFilter(q)
	if err != nil {
		return ""
	}
	out := f.Values()
	if cur, err := keyset.Parse(feedback.ListName, q.Get("cursor")); err == nil && cur != nil {
		out.Set("cursor", cur.Encode(feedback.ListName))
	}
	return out.Encode()
}

func queueCloneQuery(q url.Values) url.Values {
	out := url.Values{}
	for k, vs := range q {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

func smallIntText(n int16, valid bool) string {
	if !valid {
		return ""
	}
	return strconv.Itoa(int(n))
}

// FeedbackBulk applies one action to selected items or to every item
// matching a filter. The first post answers with the exact count to confirm;
// the second carries confirm=N and runs only if the selection still holds N
// items, all in one transaction.
func (h *Handlers) FeedbackBulk(c echo.Context) error {
	caller := CallerOf(c)
	form, err := c.FormParams()
	if err != nil {
		return errs.InvalidField("form", "could not be read")
	}
	b, label, err := h.bulkFromForm(c, form)
	if err != nil {
		return err
	}
	back := "/feedback"
	if fq := queueQueryParam(form.Get("filter")); fq != "" {
		back += "?" + fq
	}
	store := h.Feedback
	count := len(b.IDs)
	if b.Filter != nil {
		if count, err = store.Matching(ctx(c), caller.OrgID, *b.Filter); err != nil {
			return err
		}
		if count > feedback.MaxBulk {
			return errs.InvalidField("filter", "matches more than %d items: narrow it first", feedback.MaxBulk)
		}
	}
	confirmView := views.BulkConfirmView{Label: label, Count: count, Back: back, Fields: bulkFields(form)}
	page := h.page(c, "Confirm bulk action", "queue")
	raw := form.Get("confirm")
	if raw == "" {
		// The first few items, so the curator sees what the count is of.
		first, err := store.BulkPreview(ctx(c), caller.OrgID, b, bulkPreviewSize)
		if err != nil {
			return err
		}
		for _, it := range first {
			confirmView.Items = append(confirmView.Items, views.BulkItem{URL: feedbackItemURL(it.ID.String(), ""), Query: it.Query, Status: it.Status})
		}
		return render(c, http.StatusOK, views.BulkConfirmPage(page, confirmView))
	}
	expected, err := strconv.Atoi(raw)
	if err != nil || expected < 0 {
		return errs.InvalidField("confirm", "must be the number of items you confirmed")
	}
	n, err := store.ApplyBulk(ctx(c), actor(c), caller.OrgID, b, expected)
	var conflict *errs.Conflict
	if errors.As(err, &conflict) {
		confirmView.Conflict = conflict.Message
		return render(c, http.StatusConflict, views.BulkConfirmPage(page, confirmView))
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", label+": applied to "+views.Count(n, "item", "items")+".")
	return redirect(c, back)
}

// bulkFromForm reads the bulk form: op, its argument, and either ids or
// all=1 with the queue's filter.
func (h *Handlers) bulkFromForm(c echo.Context, form url.Values) (feedback.Bulk, string, error) {
	var b feedback.Bulk
	var label string
	v := &errs.Invalid{}
	switch op := form.Get("op"); op {
	case "approve":
		b.Status, label = "approved", "Approve"
	case "reject":
		b.Status, label = "rejected", "Reject"
	case "needs_correction":
		b.Status, label = "needs_correction", "Needs correction"
	case "tag":
		tags, msg := feedback.NormalizeTags([]string{form.Get("tag")})
		if msg != "" {
			v.Add("tag", "%s", msg)
		} else {
			b.AddTag, label = tags[0], "Add tag “"+tags[0]+"”"
		}
	case "assign":
		b.Assign, label = true, "Unassign"
		if a := form.Get("assignee"); a != "" {
			id, err := uuid.Parse(a)
			if err != nil {
				v.Add("assignee", "is not a user id")
				break
			}
			u, err := h.Accounts.GetUser(ctx(c), CallerOf(c).OrgID, id)
			if err != nil {
				v.Add("assignee", "no such user in this organisation")
				break
			}
			b.Assignee, label = id, "Assign to "+u.Email
		}
	default:
		v.Add("op", "choose approve, reject, needs_correction, tag or assign")
	}
	if form.Get("all") == "1" {
		q, err := url.ParseQuery(form.Get("filter"))
		if err != nil {
			v.Add("filter", "is not a query string")
		} else if f, err := feedback.ParseFilter(q); err != nil {
			var invalid *errs.Invalid
			if errors.As(err, &invalid) {
				v.Errors = append(v.Errors, invalid.Errors...)
			}
		} else {
			b.Filter = &f
		}
	} else {
		seen := map[uuid.UUID]bool{}
	ids:
		for _, field := range form["ids"] {
			for _, raw := range splitIDs(field) {
				id, err := uuid.Parse(raw)
				if err != nil {
					v.Add("ids", "%q is not an item id", queueClip(raw, 40))
					break ids
				}
				if !seen[id] {
					seen[id] = true
					b.IDs = append(b.IDs, id)
				}
			}
		}
		if len(b.IDs) > 0 && !v.Has() {
			known, err := h.Feedback.KnownIDs(ctx(c), CallerOf(c).OrgID, b.IDs)
			if err != nil {
				return b, label, err
			}
			b.IDs = known
		}
		if len(b.IDs) == 0 && !v.Has() {
			v.Add("ids", "select at least one item, or choose all matching the filter")
		}
		if len(b.IDs) > feedback.MaxBulk {
			v.Add("ids", "at most %d items at once", feedback.MaxBulk)
		}
	}
	return b, label, v.Err()
}

// bulkFields are the bulk form's fields to post again with the confirmation.
func bulkFields(form url.Values) []views.BulkField {
	var out []views.BulkField
	for _, name := range []string{"op", "tag", "assignee", "all", "filter"} {
		if val := form.Get(name); val != "" {
			out = append(out, views.BulkField{Name: name, Value: val})
		}
	}
	if form.Get("all") != "1" {
		var ids []string
		for _, field := range form["ids"] {
			ids = append(ids, splitIDs(field)...)
		}
		out = append(out, views.BulkField{Name: "ids", Value: strings.Join(ids, ",")})
	}
	return out
}

// splitIDs reads one ids field: an id, or many separated by commas or
// spaces. A selection of any size travels as one field, because Go refuses
// a form of more than 10,000 fields (and the confirmation re-posts every id).
func splitIDs(field string) []string {
	return strings.FieldsFunc(field, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
}

func queueClip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

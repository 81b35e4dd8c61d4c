package handlers

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/codebook"
	"github.com/curate/curate/internal/errs"
)

// APICodebookRuleCreate adds a rule (the codebook is made on first use):
// 201 with it.
func (h *Handlers) APICodebookRuleCreate(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in codebook.NewRule
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	r, err := h.Codebooks.AddRule(ctx(c), actor(c), CallerOf(c).OrgID, c.Param("name"), in)
	if err != nil {
		return err
	}
	setETag(c, int32(r.Version))
	return c.JSON(http.StatusCreated, r)
}

// APICodebookRuleList lists a codebook's rules: status and q filter.
func (h *Handlers) APICodebookRuleList(c echo.Context) error {
	params, err := queryParams(c, "status", "q", "sort")
	if err != nil {
		return err
	}
	list, err := h.Codebooks.Rules(ctx(c), CallerOf(c).OrgID, c.Param("name"), params.Get("status"), params.Get("q"), params.Get("sort"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listBody[codebook.Rule]{Data: list})
}

// APICodebookRulePatch edits a rule; If-Match must carry the version the
// caller saw, and a stale one answers 409 with the rule as it is now.
func (h *Handlers) APICodebookRulePatch(c echo.Context) error {
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
	var in codebook.NewRule
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	r, err := h.Codebooks.UpdateRule(ctx(c), actor(c), CallerOf(c).OrgID, c.Param("name"), id, int(version), in)
	if err != nil {
		return err
	}
	setETag(c, int32(r.Version))
	return c.JSON(http.StatusOK, r)
}

// APICodebookPublish publishes the active rules: 201 with the new version,
// or 200 with the newest when nothing changed.
func (h *Handlers) APICodebookPublish(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	p, created, err := h.Codebooks.Publish(ctx(c), actor(c), CallerOf(c).OrgID, c.Param("name"))
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, p)
}

// APICodebookGet answers the newest published version with its prompt text
// cut to budget_tokens, with an ETag.
func (h *Handlers) APICodebookGet(c echo.Context) error {
	params, err := queryParams(c, "budget_tokens")
	if err != nil {
		return err
	}
	budget := 0
	if s := params.Get("budget_tokens"); s != "" {
		if budget, err = strconv.Atoi(s); err != nil || budget < 1 || budget > 1_000_000 {
			return errs.InvalidField("budget_tokens", "must be a whole number from 1 to 1000000")
		}
	}
	p, err := h.Codebooks.Current(ctx(c), CallerOf(c).OrgID, c.Param("name"), budget)
	if err != nil {
		return err
	}
	etag := `"` + p.ContentHash + "-" + strconv.Itoa(budget) + `"`
	c.Response().Header().Set("ETag", etag)
	if c.Request().Header.Get("If-None-Match") == etag {
		return c.NoContent(http.StatusNotModified)
	}
	return c.JSON(http.StatusOK, p)
}

// APICodebookRetrieve answers the k rules most relevant to a query.
func (h *Handlers) APICodebookRetrieve(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	in := struct {
		Query string `json:"query"`
		K     *int   `json:"k"`
	}{}
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	k := 5
	if in.K != nil {
		k = *in.K
	}
	version, rules, err := h.Codebooks.Retrieve(ctx(c), CallerOf(c).OrgID, c.Param("name"), in.Query, k)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"version": version, "rules": rules})
}

// APICodebookExport writes the newest published version: the playbook
// text (?format=playbook, the default) or JSON.
func (h *Handlers) APICodebookExport(c echo.Context) error {
	params, err := queryParams(c, "format")
	if err != nil {
		return err
	}
	p, err := h.Codebooks.Export(ctx(c), CallerOf(c).OrgID, c.Param("name"))
	if err != nil {
		return err
	}
	switch params.Get("format") {
	case "", "playbook":
		return c.Blob(http.StatusOK, "text/plain; charset=utf-8", []byte(p.Prompt))
	case "json":
		return c.JSON(http.StatusOK, p)
	}
	return errs.InvalidField("format", "must be playbook or json")
}

// maxImport bounds an import's body.
const maxImport = 4 << 20

// APICodebookImport reads a playbook (text/plain) or JSON ({"rules": [...]}
// as exported) into a codebook as active rules and publishes it: 201.
func (h *Handlers) APICodebookImport(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var rules []codebook.VersionRule
	if strings.HasPrefix(c.Request().Header.Get(echo.HeaderContentType), echo.MIMEApplicationJSON) {
		var in struct {
			Rules []codebook.VersionRule `json:"rules"`
		}
		body, err := readJSONBody(c)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(body, &in); err != nil {
			return errs.InvalidField("rules", "must be the rules of an exported codebook")
		}
		rules = in.Rules
	} else {
		body, err := io.ReadAll(io.LimitReader(c.Request().Body, maxImport+1))
		if err != nil {
			return err
		}
		if len(body) > maxImport {
			return errs.InvalidField("file", "is over %d bytes", maxImport)
		}
		if rules, err = codebook.ParsePlaybook(string(body)); err != nil {
			return err
		}
	}
	p, err := h.Codebooks.Import(ctx(c), actor(c), CallerOf(c).OrgID, c.Param("name"), rules)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, p)
}

// APICodebookSuggest asks the reflector for a rule from each corrected
// item named: 202 with how many were queued.
func (h *Handlers) APICodebookSuggest(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var in struct {
		Endpoint    string      `json:"endpoint"`
		FeedbackIDs []uuid.UUID `json:"feedback_ids"`
	}
	if err := decodeJSON(c, &in, ""); err != nil {
		return err
	}
	n, err := h.Codebooks.Suggest(ctx(c), actor(c), CallerOf(c).OrgID, c.Param("name"),
		codebook.SuggestRequest{Endpoint: in.Endpoint, FeedbackIDs: in.FeedbackIDs})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]int{"queued": n})
}

// APICodebookSuggestionList lists a codebook's suggestions: status filters.
func (h *Handlers) APICodebookSuggestionList(c echo.Context) error {
	params, err := queryParams(c, "status")
	if err != nil {
		return err
	}
	rows, _, err := h.Codebooks.Suggestions(ctx(c), CallerOf(c).OrgID, c.Param("name"), params.Get("status"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listBody[codebook.Suggestion]{Data: rows})
}

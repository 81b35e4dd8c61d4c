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

	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/routing"
	"github.com/curate/curate/views"
)

// RoutingPage is the routing page: the rules, the teams and their forms.
func (h *Handlers) RoutingPage(c echo.Context) error {
	return h.renderRouting(c, http.StatusOK, views.RoutingView{Values: map[string]string{"mode": routing.RoundRobin, "cap": "20",
		"type": "thumbs_down"}})
}

func (h *Handlers) renderRouting(c echo.Context, status int, v views.RoutingView) error {
	caller := CallerOf(c)
	rules, err := h.Routing.Rules(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	teams, err := h.Routing.Teams(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	users, err := h.Routing.Users(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	v.CanEdit = caller.Role.AtLeast(auth.Admin)
	for _, r := range rules {
		row := views.RoutingRuleRow{ID: r.ID.String(), Name: r.Name, Mode: r.Mode, Cap: r.Cap, Routed: r.Routed, Active: r.Active,
			Filter: filterText(r.Filter), FilterURL: feedbackQueueURL(mustQuery(r.Filter))}
		if r.Team != "" {
			row.To = "the team " + r.Team
		} else {
			var names []string
			for _, cu := range r.Curators {
				if len(cu.Tags) > 0 && r.Mode == routing.ByTag {
					names = append(names, cu.Email+" ("+strings.Join(cu.Tags, ", ")+")")
				} else {
					names = append(names, cu.Email)
				}
			}
			row.To = strings.Join(names, ", ")
		}
		v.Rules = append(v.Rules, row)
	}
	for _, t := range teams {
		row := views.RoutingTeamRow{Name: t.Name}
		for _, m := range t.Members {
			row.Members = append(row.Members, m.Email)
		}
		v.Teams = append(v.Teams, row)
		v.TeamOptions = append(v.TeamOptions, views.Option{Value: t.ID.String(), Label: t.Name})
	}
	for _, u := range users {
		v.Users = append(v.Users, views.Option{Value: u.ID.String(), Label: u.Email})
	}
	v.Modes = options(routing.Modes...)
	v.Types = append([]views.Option{{Value: "", Label: "any"}}, options(feedback.Types...)...)
	if v.Values == nil {
		v.Values = map[string]string{}
	}
	return render(c, status, views.RoutingPage(h.page(c, "Routing", "feedback"), v))
}

func mustQuery(s string) url.Values {
	q, _ := url.ParseQuery(s)
	return q
}

// filterText is a queue filter in words ("Type Thumbs down, Tag billing").
func filterText(raw string) string {
	q := mustQuery(raw)
	var parts []string
	for _, k := range feedback.FilterParams {
		if v := q.Get(k); v != "" {
			parts = append(parts, views.Label(k)+" "+filterValue(k, v))
		}
	}
	if len(parts) == 0 {
		return "every new item"
	}
	return strings.Join(parts, ", ")
}

// RoutingRuleCreate adds a rule from the form.
func (h *Handlers) RoutingRuleCreate(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return err
	}
	values := map[string]string{}
	for _, f := range []string{"name", "type", "tag", "mode", "cap", "team_id"} {
		values[f] = strings.TrimSpace(form.Get(f))
	}
	chosen := map[string]bool{}
	in := routing.NewRule{Name: values["name"], Mode: values["mode"], Filter: url.Values{}}
	bad := &errs.Invalid{}
	if values["type"] != "" {
		in.Filter.Set("type", values["type"])
	}
	if values["tag"] != "" {
		in.Filter.Set("tag", values["tag"])
	}
	if n, err := strconv.Atoi(values["cap"]); err == nil {
		in.Cap = n
	} else {
		bad.Add("cap", "must be a whole number")
	}
	if id := values["team_id"]; id != "" {
		if in.TeamID, err = uuid.Parse(id); err != nil {
			bad.Add("team_id", "choose a team")
		}
	}
	for _, id := range form["curator"] {
		uid, err := uuid.Parse(id)
		if err != nil {
			bad.Add("curators", "choose curators from the list")
			continue
		}
		chosen[id] = true
		tags := strings.FieldsFunc(form.Get("tags."+id), func(r rune) bool { return r == ',' })
		in.Curators = append(in.Curators, routing.Curator{UserID: uid, Tags: tags})
	}
	for key := range form {
		if strings.HasPrefix(key, "tags.") {
			values[key] = form.Get(key)
		}
	}
	if !bad.Has() {
		var r routing.Rule
		if r, err = h.Routing.CreateRule(ctx(c), actor(c), CallerOf(c).OrgID, in); err == nil {
			h.Sessions.Flash(c, "ok", fmt.Sprintf("The rule %s routes new items from now on.", r.Name))
			return redirect(c, "/feedback/routing")
		}
		var inv *errs.Invalid
		if !errors.As(err, &inv) {
			return err
		}
		bad = inv
	}
	problems := map[string]string{}
	for _, fe := range bad.Errors {
		field := fe.Field
		switch {
		case strings.HasPrefix(field, "filter."):
			field = strings.TrimPrefix(field, "filter.")
			if field != "type" && field != "tag" {
				field = "form"
			}
		case strings.HasPrefix(field, "curators"):
			field = "curators"
		}
		if _, taken := problems[field]; !taken {
			problems[field] = fe.Message
		}
	}
	return h.renderRouting(c, http.StatusUnprocessableEntity, views.RoutingView{Values: values, Errors: problems, Chosen: chosen})
}

// RoutingRuleActive turns a rule on or off.
func (h *Handlers) RoutingRuleActive(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	active := c.FormValue("active") == "1"
	if err := h.Routing.SetActive(ctx(c), actor(c), CallerOf(c).OrgID, id, active); err != nil {
		return err
	}
	if active {
		h.Sessions.Flash(c, "ok", "The rule is on.")
	} else {
		h.Sessions.Flash(c, "ok", "The rule is off: it routes nothing until it is on again.")
	}
	return redirect(c, "/feedback/routing")
}

// RoutingTeamCreate adds a team from the form.
func (h *Handlers) RoutingTeamCreate(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return err
	}
	name := strings.TrimSpace(form.Get("name"))
	chosen := map[string]bool{}
	var members []routing.Curator
	for _, id := range form["member"] {
		if uid, err := uuid.Parse(id); err == nil {
			members = append(members, routing.Curator{UserID: uid})
			chosen[id] = true
		}
	}
	t, err := h.Routing.CreateTeam(ctx(c), actor(c), CallerOf(c).OrgID, name, members)
	var inv *errs.Invalid
	if errors.As(err, &inv) {
		problems := map[string]string{}
		for _, fe := range inv.Errors {
			field := fe.Field
			if strings.HasPrefix(field, "members") {
				field = "members"
			}
			if _, taken := problems[field]; !taken {
				problems[field] = fe.Message
			}
		}
		return h.renderRouting(c, http.StatusUnprocessableEntity, views.RoutingView{TeamValues: map[string]string{"name": name},
			TeamErrors: problems, TeamChosen: chosen, Values: map[string]string{"mode": routing.RoundRobin, "cap": "20"}})
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "The team "+t.Name+" is made: a rule can hand items to it.")
	return redirect(c, "/feedback/routing")
}

// RoutingRun runs the rules at once.
func (h *Handlers) RoutingRun(c echo.Context) error {
	res, err := h.Routing.Route(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("Routed %s.", views.Count(res.Assigned, "item", "items"))
	if res.Waiting > 0 {
		msg += fmt.Sprintf(" %s no curator could take (each holds the cap, or none takes its tags).", views.Count(res.Waiting, "item", "items"))
	}
	h.Sessions.Flash(c, "ok", msg)
	return redirect(c, "/feedback/routing")
}

// FeedbackTrainingData records a curator's decision on whether an item
// may be training data, from its page.
func (h *Handlers) FeedbackTrainingData(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var use *bool
	switch c.FormValue("is_training_data") {
	case "true":
		b := true
		use = &b
	case "false":
		b := false
		use = &b
	case "":
	default:
		return errs.InvalidField("is_training_data", "choose to use it, leave it out, or let hygiene decide")
	}
	st, err := h.Hygiene.Decide(ctx(c), actor(c), CallerOf(c).OrgID, id, use)
	if err != nil {
		return err
	}
	switch {
	case use == nil && st.IsTrainingData:
		h.Sessions.Flash(c, "ok", "Hygiene decides again: the item may be training data.")
	case use == nil:
		h.Sessions.Flash(c, "ok", "Hygiene decides again: the item stays out of training data.")
	case st.IsTrainingData:
		h.Sessions.Flash(c, "ok", "The item may be training data.")
	default:
		h.Sessions.Flash(c, "ok", "The item is left out of training data.")
	}
	return redirect(c, "/feedback/"+id.String())
}

// filterValue is a filter's value as a page shows it: the words of an
// enum (a status, a type, a source), anything else as it was typed.
func filterValue(key, value string) string {
	switch key {
	case "status", "type", "source":
		return views.Label(value)
	}
	return value
}

package handlers

import (
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/monitors"
	"github.com/curate/curate/views"
)

// MonitorList is the production monitors' page: each served version's
// latency, feedback rate, error rate and score distribution against their
// limits now (a reward model's latency and score drift); ?version= shows one, the evidence its alerts link to.
func (h *Handlers) MonitorList(c echo.Context) error {
	var only uuid.UUID
	if s := c.QueryParam("version"); s != "" {
		id, err := uuid.Parse(s)
		if err != nil {
			return errs.ErrNotFound
		}
		only = id
	}
	st, versions, err := h.Monitors.Check(ctx(c), CallerOf(c).OrgID, time.Now())
	if err != nil {
		return err
	}
	m := views.MonitorsView{Only: only != uuid.Nil, Thresholds: thresholdsText(st)}
	for _, v := range versions {
		if only != uuid.Nil && v.ID != only {
			continue
		}
		mv := views.MonitorVersion{ID: v.ID.String(), Name: v.Model + " " + v.Version, FirstServed: views.When(v.FirstServed),
			Window: "at " + views.When(v.Until), Reward: v.Kind == "reward"}
		for _, r := range v.Readings {
			state := "waiting"
			switch {
			case r.Breached:
				state = "breached"
			case r.Ready:
				state = "ok"
			}
			mv.Readings = append(mv.Readings, views.MonitorReading{Kind: r.Kind, Text: r.Text, State: state})
		}
		m.Versions = append(m.Versions, mv)
	}
	if only != uuid.Nil && len(m.Versions) == 0 {
		return errs.ErrNotFound
	}
	return render(c, http.StatusOK, views.MonitorsPage(h.page(c, "Production monitors", "models"), m))
}

// thresholdsText says the monitors' settings in a sentence.
func thresholdsText(st monitors.Settings) string {
	if !st.Enabled {
		return "The monitors are off: no breach is alerted."
	}
	shift := fmt.Sprintf("a Kolmogorov–Smirnov p-value below %g", st.ShiftPValue)
	if st.ShiftTest == monitors.ShiftPSI {
		shift = fmt.Sprintf("a population stability index above %g", st.ShiftPSI)
	}
	return fmt.Sprintf("Every served version is read over the last %s with the alert rules every five minutes: a latency p95 above %g s, "+
		"feedback down more than %g%% on the same hours a week ago, more than %g%% of feedback reporting an error, and %s between the live "+
		"scores of the last %s and of the version's first week each open an alert. A reward model is read on the requests Curate sends it: "+
		"their latency p95 above %d ms, and its mean live score over the last %s moving more than %g from its first week's. "+
		"A monitor judges only with at least %d items.",
		lastHours(st.WindowHours), float64(st.LatencyP95MS)/1000, 100*st.FeedbackDrop, 100*st.ErrorRate, shift,
		lastHours(st.ShiftWindowHours), st.RewardLatencyP95MS, lastHours(st.ShiftWindowHours), st.RewardDrift, st.MinSamples)
}

// lastHours is a window in words after "the last": "hour", "24 hours".
func lastHours(h int) string {
	if h == 1 {
		return "hour"
	}
	return views.Count(h, "hour", "hours")
}

// APIMonitorList answers every served version's monitors now, with the
// settings they were read under.
func (h *Handlers) APIMonitorList(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	st, versions, err := h.Monitors.Check(ctx(c), CallerOf(c).OrgID, time.Now())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, struct {
		Settings monitors.Settings  `json:"settings"`
		Data     []monitors.Version `json:"data"`
	}{st, versions})
}

// APIMonitorSettings reads the organisation's monitor settings.
func (h *Handlers) APIMonitorSettings(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	st, err := h.Monitors.Settings(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

// APIMonitorSettingsSave replaces the organisation's monitor settings;
// fields left out keep the defaults.
func (h *Handlers) APIMonitorSettingsSave(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	st := monitors.Defaults()
	if err := decodeJSON(c, &st, ""); err != nil {
		return err
	}
	if err := h.Monitors.SaveSettings(ctx(c), actor(c), CallerOf(c).OrgID, st); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

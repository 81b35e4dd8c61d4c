package web_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/web/webtest"
)

// An experiment whose effect is opposite on two plans, read by segment:
// the API answers both segments with their effects, intervals and units,
// and the panel's segment table flags the harmed one.
func TestExperimentSegments(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	ctx := context.Background()
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	viewer := s.APIKey(org, "dash", "viewer")
	svc := s.App.Services
	var ids [2]uuid.UUID
	for i, id := range []string{"ft:gpt-4o-mini:acme::a", "ft:gpt-4o-mini:acme::b"} {
		v, err := svc.Models.Register(ctx, audit.System, org, models.NewVersion{Name: "support", Version: fmt.Sprintf("1.%d.0", i), ModelID: id, Kind: models.KindFull})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = v.ID
	}
	in := experiments.NewExperiment{Key: "plans", ControlModelID: ids[0], TreatmentModelID: ids[1]}
	if _, err := svc.Experiments.Create(ctx, audit.System, org, in); err != nil {
		t.Fatal(err)
	}
	x, err := svc.Experiments.SetStatus(ctx, audit.System, org, "plans", experiments.Running, "", "")
	if err != nil {
		t.Fatal(err)
	}
	// Free: 40% → 60% thumbs up; pro: 70% → 55%; 100 units per arm each.
	if _, err := s.Pool.Exec(ctx, `WITH u AS (
			SELECT plan, arm, i, plan || '-' || arm || '-' || i AS id,
			       i < CASE plan WHEN 'free' THEN 40 + 20 * arm ELSE 70 - 15 * arm END AS up
			FROM unnest(ARRAY['free', 'pro']) AS plan, generate_series(0, 1) AS arm, generate_series(0, 99) AS i
		), x AS (
			INSERT INTO experiment_exposures (experiment_id, phase, unit_id, arm, first_seen, phase_started_at)
			SELECT $1, 1, id, arm, now() - interval '1 hour', (SELECT experiment_phase_start(e) FROM experiments e WHERE e.id = $1) FROM u
		)
		INSERT INTO feedback (org_id, end_user_id, experiment_id, query, response, feedback_type, source, content_hash, context)
		SELECT $2, id, $1, 'q', 'a', CASE WHEN up THEN 'thumbs_up' ELSE 'thumbs_down' END::feedback_type, 'api', '\x00', jsonb_build_object('plan', plan)
		FROM u`, x.ID, org); err != nil {
		t.Fatal(err)
	}
	var res struct {
		Segments struct {
			Dimension string `json:"dimension"`
			Segments  []struct {
				Value   string   `json:"value"`
				Units   []int64  `json:"units"`
				Harmful []string `json:"harmful"`
				Metrics []struct {
					Arms []struct {
						RelativeChange *float64   `json:"relative_change"`
						CI             []*float64 `json:"ci"`
						AdjustedPValue *float64   `json:"adjusted_p_value"`
					} `json:"arms"`
				} `json:"metrics"`
			} `json:"segments"`
		} `json:"segments"`
	}
	s.API(viewer, http.MethodGet, "/api/experiments/plans/results?segment=context.plan", nil).Must(t, http.StatusOK).JSON(t, &res)
	if res.Segments.Dimension != "context.plan" || len(res.Segments.Segments) != 2 {
		t.Fatalf("segments %+v", res.Segments)
	}
	for _, sg := range res.Segments.Segments {
		tr := sg.Metrics[0].Arms[1]
		if len(sg.Units) != 2 || sg.Units[0] != 100 || sg.Units[1] != 100 || tr.RelativeChange == nil || len(tr.CI) != 2 || tr.AdjustedPValue == nil {
			t.Errorf("segment %s: %+v", sg.Value, sg)
		}
		if harmed := len(sg.Harmful) > 0; harmed != (sg.Value == "pro") {
			t.Errorf("segment %s harmed %v", sg.Value, sg.Harmful)
		}
	}
	s.API(viewer, http.MethodGet, "/api/experiments/plans/results?segment=plan", nil).Must(t, http.StatusUnprocessableEntity)

	page := s.SignedIn("ada@acme.test").Get("/experiments/plans?segment_key=context.plan")
	if page.Status != http.StatusOK {
		t.Fatalf("panel: %d", page.Status)
	}
	if !regexp.MustCompile(`data-segment="pro" data-harmful`).MatchString(page.Body) ||
		regexp.MustCompile(`data-segment="free" data-harmful`).MatchString(page.Body) {
		t.Errorf("the segment table does not flag pro alone as harmed:\n%s", regexpFind(t, `(?s)(<table class="table" id="segment-table">.*?</table>)`, page.Body))
	}
}

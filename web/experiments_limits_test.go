package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/web/webtest"
)

// Experiment creation refuses what a results page cannot sensibly hold or
// a schedule cannot mean: a metric listed twice (also once as a goal and
// once as a guardrail), more than 10 metrics, an end in the past, and a
// minimum sample outside 2 to 10,000,000, 0 included; a minimum left out is
// 100.
func TestExperimentCreateLimits(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	var ids []string
	for _, v := range []string{"1.0.0", "2.0.0"} {
		mv, err := s.App.Services.Models.Register(context.Background(), audit.System, org, models.NewVersion{Name: "assist", Version: v, ModelID: "assist-" + v})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, mv.ID.String())
	}
	body := func(extra map[string]any) map[string]any {
		b := map[string]any{"key": "limits", "control_model_id": ids[0], "treatment_model_id": ids[1]}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	many := make([]string, 10_000)
	for i := range many {
		many[i] = "thumbs_up_rate"
	}
	for _, c := range []struct {
		name   string
		extra  map[string]any
		fields string
	}{
		{"a metric twice", map[string]any{"metrics": []string{"thumbs_up_rate", "avg_rating", "thumbs_up_rate"}}, "metrics[2]"},
		{"a goal as a guardrail", map[string]any{"metrics": []string{"latency"}, "guardrails": []string{"avg_safety", "latency"}}, "guardrails[1]"},
		{"10,000 copies", map[string]any{"metrics": many}, "metrics"},
		{"11 guardrails", map[string]any{"guardrails": many[:11]}, "guardrails"},
		{"ends in the past", map[string]any{"ends_at": time.Now().Add(-time.Hour)}, "ends_at"},
		{"min sample 0", map[string]any{"min_sample_per_arm": 0}, "min_sample_per_arm"},
		{"min sample 1", map[string]any{"min_sample_per_arm": 1}, "min_sample_per_arm"},
		{"min sample too large", map[string]any{"min_sample_per_arm": 10_000_001}, "min_sample_per_arm"},
	} {
		var p problemDoc
		s.API(admin, http.MethodPost, "/api/models/ab-test", body(c.extra)).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
		if p.fields() != c.fields {
			t.Errorf("%s: fields %q, want %q", c.name, p.fields(), c.fields)
		}
	}
	var list struct {
		Data []any `json:"data"`
	}
	s.API(admin, http.MethodGet, "/api/experiments", nil).Must(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 0 {
		t.Errorf("a refused experiment was stored: %v", list.Data)
	}

	var exp struct {
		MinSamplePerArm int        `json:"min_sample_per_arm"`
		EndsAt          *time.Time `json:"ends_at"`
	}
	s.API(admin, http.MethodPost, "/api/models/ab-test", body(map[string]any{"metrics": []string{"thumbs_up_rate", "avg_rating"},
		"guardrails": []string{"latency"}, "ends_at": time.Now().Add(24 * time.Hour)})).Must(t, http.StatusCreated).JSON(t, &exp)
	if exp.MinSamplePerArm != 100 || exp.EndsAt == nil {
		t.Errorf("created %+v", exp)
	}
	res := s.API(admin, http.MethodPost, "/api/models/ab-test", body(map[string]any{"key": "limits-2", "min_sample_per_arm": 2,
		"metrics": many[:1]})).Must(t, http.StatusCreated)
	if !strings.Contains(res.Body, `"min_sample_per_arm":2`) {
		t.Errorf("created %s", res.Body)
	}
}

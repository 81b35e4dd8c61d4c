package web_test

import (
	"net/http"
	"testing"

	"github.com/curate/curate/web/webtest"
)

type rewardFormulaDoc struct {
	ID      string             `json:"id"`
	Name    string             `json:"name"`
	Version int                `json:"version"`
	Weights map[string]float64 `json:"weights"`
	Formula string             `json:"formula"`
}

// Reward formulas through the API: everyone reads them, the design's
// formula already there as default version 1; admins write new versions,
// bad weights are refused naming the weight, and other organisations see
// only their own.
func TestRewardFormulaAPI(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	viewer := s.APIKey(org, "dashboards", "viewer")
	other := s.APIKey(s.Org("globex"), "theirs", "viewer")

	var list struct {
		Data []rewardFormulaDoc `json:"data"`
	}
	s.API(viewer, http.MethodGet, "/api/reward-formulas", nil).Must(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].Name != "default" || list.Data[0].Version != 1 ||
		list.Data[0].Formula != "R = 0.35·chain + 0.25·emergency − 0.15·risk + 0.25·judge" || list.Data[0].Weights["risk"] != -0.15 {
		t.Fatalf("seeded list %+v", list.Data)
	}

	body := map[string]any{"weights": map[string]any{"judge": 0.8, "reference_f1": 0.2}}
	s.API(viewer, http.MethodPost, "/api/reward-formulas", body).Must(t, http.StatusForbidden)
	var v rewardFormulaDoc
	s.API(admin, http.MethodPost, "/api/reward-formulas", body).Must(t, http.StatusCreated).JSON(t, &v)
	if v.Name != "default" || v.Version != 2 || v.Formula != "R = 0.8·judge + 0.2·reference_f1" {
		t.Errorf("created %+v", v)
	}

	var p problemDoc
	s.API(admin, http.MethodPost, "/api/reward-formulas", map[string]any{
		"name": "strict", "weights": map[string]any{"judge": "high", "chain": 0.5, "vibes": 1},
	}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "weights.judge,weights.vibes" {
		t.Errorf("bad weights named %q", p.fields())
	}
	s.API(admin, http.MethodPost, "/api/reward-formulas", map[string]any{"weights": []float64{1}}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "weights" {
		t.Errorf("weights as a list named %q", p.fields())
	}
	s.API(admin, http.MethodPost, "/api/reward-formulas", map[string]any{"weights": map[string]any{"judge": 1}, "colour": "red"}).
		Must(t, http.StatusUnprocessableEntity)

	s.API(viewer, http.MethodGet, "/api/reward-formulas", nil).Must(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 2 || list.Data[0].ID != v.ID {
		t.Errorf("list after writing %+v", list.Data)
	}
	s.API(other, http.MethodGet, "/api/reward-formulas", nil).Must(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].Version != 1 {
		t.Errorf("another organisation sees %+v", list.Data)
	}
}

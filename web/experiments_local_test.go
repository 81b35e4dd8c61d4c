package web_test

import (
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/curate/curate/web/webtest"
)

type configDoc struct {
	Key            string     `json:"key"`
	Status         string     `json:"status"`
	Seed           string     `json:"seed"`
	Phase          int        `json:"phase"`
	PhaseStartedAt *time.Time `json:"phase_started_at"`
	Coverage       float64    `json:"coverage"`
	Weights        []float64  `json:"weights"`
	Arms           []struct {
		Index   int    `json:"index"`
		Name    string `json:"name"`
		Version string `json:"version"`
		Model   string `json:"model"`
		BaseURL string `json:"base_url"`
		Served  bool   `json:"served"`
	} `json:"arms"`
	ConfigVersion int64 `json:"config_version"`
}

// localArm is what a client assigning units itself computes, written from
// the README's description rather than Curate's code: GrowthBook's
// version-2 hash (FNV-1a 32 of the seed and the unit id, hashed again as a
// decimal string, modulo 10,000, over 10,000) placed in the cumulative
// weights scaled by the coverage; -1 outside it.
func localArm(c configDoc, unit string) int {
	fnv1a := func(s string) uint32 {
		h := fnv.New32a()
		h.Write([]byte(s))
		return h.Sum32()
	}
	n := fnv1a(strconv.FormatUint(uint64(fnv1a(c.Seed+unit)), 10))
	v := float64(n%10000) / 10000
	lo := 0.0
	for i, w := range c.Weights {
		hi := lo + c.Coverage*w
		if v >= lo && v < hi {
			return i
		}
		lo = hi
	}
	return -1
}

// Assignment without a round trip, across two servers of one deployment:
// a client reads the configuration from one (with an ETag; 304 while it
// holds), assigns 3,000 units itself and gets the arms the other server's
// assign answers, after a change of weights and coverage made on the first
// server that the other follows at once. The client's exposures are
// recorded idempotently, a unit reported in the other arm counts once as
// a conflict, a malformed batch is refused by field, and roles and
// organisations apply.
func TestExperimentLocalAssignment(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{Workers: 2})
	other := s.Another(webtest.Options{})
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	assistant := s.APIKey(org, "assistant", "curator")
	viewer := s.APIKey(org, "dash", "viewer")
	stranger := s.APIKey(s.Org("globex"), "dash", "admin")
	vllm, v1, v2, staged := servedVersions(t, s, admin, viewer)
	s.API(admin, http.MethodPost, "/api/models/ab-test", map[string]any{"key": "local", "control_model_id": v1.ID, "treatment_model_id": v2.ID,
		"traffic_split": 0.5}).Must(t, http.StatusCreated)
	s.API(admin, http.MethodPost, "/api/experiments/local/start", nil).Must(t, http.StatusOK)

	// The other server assigns once, keeping the configuration.
	other.API(assistant, http.MethodPost, "/api/experiments/local/assign", map[string]any{"unit_id": "warm"}).Must(t, http.StatusOK)

	getConfig := func(etag string) (configDoc, webtest.Response) {
		t.Helper()
		h := http.Header{"Authorization": {"Bearer " + viewer}}
		if etag != "" {
			h.Set("If-None-Match", etag)
		}
		res := s.Client().Do(http.MethodGet, "/api/experiments/local/config", nil, h)
		var c configDoc
		if res.Status == http.StatusOK {
			res.JSON(t, &c)
		}
		return c, res
	}
	c, res := getConfig("")
	etag := res.Header.Get("ETag")
	if res.Status != http.StatusOK || etag == "" || c.Status != "running" || c.Seed != "local" || c.Phase != 1 || c.Coverage != 1 ||
		len(c.Weights) != 2 || len(c.Arms) != 2 || c.Arms[1].Model != staged["served_name"] || c.Arms[1].BaseURL != vllm.URL ||
		c.Arms[0].Version != "1.0.0" || !c.Arms[0].Served {
		t.Fatalf("config %d %q %+v", res.Status, etag, c)
	}
	if _, res := getConfig(etag); res.Status != http.StatusNotModified || res.Body != "" {
		t.Errorf("unchanged config with If-None-Match: %d %q", res.Status, res.Body)
	}
	if _, res := getConfig(`"0", W/` + etag); res.Status != http.StatusNotModified {
		t.Errorf("a list of tags naming it weakly: %d", res.Status)
	}

	// The first server changes the split; the client's copy is then stale.
	s.API(admin, http.MethodPatch, "/api/experiments/local", map[string]any{"weights": []float64{0.3, 0.7}, "coverage": 0.8}).Must(t, http.StatusOK)
	c, res = getConfig(etag)
	if res.Status != http.StatusOK || res.Header.Get("ETag") == etag || c.Weights[1] != 0.7 || c.Coverage != 0.8 {
		t.Fatalf("after the change: %d %+v", res.Status, c)
	}

	// The client's arms against the other server's, 3,000 units.
	outside := 0
	for batch := range 3 {
		ids := make([]string, 1000)
		for i := range ids {
			ids[i] = fmt.Sprintf("user-%d", batch*1000+i)
		}
		var out struct {
			Data []assignmentDoc `json:"data"`
		}
		other.API(assistant, http.MethodPost, "/api/experiments/local/assign-batch", map[string]any{"unit_ids": ids}).Must(t, http.StatusOK).JSON(t, &out)
		for _, a := range out.Data {
			want := localArm(c, a.UnitID)
			if want < 0 {
				outside++
				if a.InExperiment || a.ArmIndex != 0 {
					t.Fatalf("%s: the client leaves it out, assign answers %+v", a.UnitID, a)
				}
			} else if !a.InExperiment || a.ArmIndex != want || a.Arm != c.Arms[want].Name || a.Model != c.Arms[want].Model {
				t.Fatalf("%s: the client computes arm %d, assign answers %+v", a.UnitID, want, a)
			}
		}
	}
	if outside < 450 || outside > 750 {
		t.Errorf("%d of 3,000 units outside a coverage of 0.8", outside)
	}

	// Exposures the client assigned itself, reported to the first server;
	// the other one's assign agrees.
	now := time.Now().UTC()
	var exposures []map[string]any
	var units []string
	for i := 0; len(units) < 300; i++ {
		u := fmt.Sprintf("local-%d", i)
		if arm := localArm(c, u); arm >= 0 {
			exposures = append(exposures, map[string]any{"unit_id": u, "arm_index": arm, "at": now})
			units = append(units, u)
		}
	}
	var rec struct {
		Inserted     int `json:"inserted"`
		Duplicates   int `json:"duplicates"`
		Conflicts    int `json:"conflicts"`
		EarlierPhase int `json:"earlier_phase"`
	}
	body := map[string]any{"exposures": exposures}
	s.API(assistant, http.MethodPost, "/api/experiments/local/exposures", body).Must(t, http.StatusOK).JSON(t, &rec)
	if rec.Inserted != 300 || rec.Duplicates != 0 || rec.Conflicts != 0 {
		t.Errorf("first report %+v", rec)
	}
	s.API(assistant, http.MethodPost, "/api/experiments/local/exposures", body).Must(t, http.StatusOK).JSON(t, &rec)
	if rec.Inserted != 0 || rec.Duplicates != 300 {
		t.Errorf("the same report again %+v", rec)
	}
	var out struct {
		Data []assignmentDoc `json:"data"`
	}
	other.API(assistant, http.MethodPost, "/api/experiments/local/assign-batch", map[string]any{"unit_ids": units}).Must(t, http.StatusOK).JSON(t, &out)
	for i, a := range out.Data {
		if a.ArmIndex != exposures[i]["arm_index"] {
			t.Fatalf("%s reported in arm %v, assigned %+v", a.UnitID, exposures[i]["arm_index"], a)
		}
	}
	wrong := []map[string]any{{"unit_id": units[0], "arm_index": 1 - exposures[0]["arm_index"].(int), "at": now}}
	for range 2 {
		s.API(assistant, http.MethodPost, "/api/experiments/local/exposures", map[string]any{"exposures": wrong}).Must(t, http.StatusOK).JSON(t, &rec)
	}
	var exp struct {
		Conflicts int `json:"conflicts"`
	}
	s.API(viewer, http.MethodGet, "/api/experiments/local", nil).Must(t, http.StatusOK).JSON(t, &exp)
	if exp.Conflicts != 1 {
		t.Errorf("a unit reported twice in the other arm counts %d conflicts, want 1", exp.Conflicts)
	}

	// Refusals.
	var p problemDoc
	s.API(assistant, http.MethodPost, "/api/experiments/local/exposures", map[string]any{"exposures": []map[string]any{
		{"unit_id": "a", "arm_index": 0, "at": now}, {"unit_id": "b", "arm_index": 2, "at": now}, {"unit_id": "c", "arm_index": 0}}}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "exposures[2].at" {
		t.Errorf("a bad batch named %q", p.fields())
	}
	s.API(assistant, http.MethodPost, "/api/experiments/local/exposures", map[string]any{"exposures": []map[string]any{
		{"unit_id": "a", "arm_index": 0, "at": now}, {"unit_id": "b", "arm_index": 2, "at": now}}}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "exposures[1].arm_index" {
		t.Errorf("an arm the experiment lacks named %q", p.fields())
	}
	s.API(assistant, http.MethodPost, "/api/experiments/local/exposures", map[string]any{"exposures": "all"}).Must(t, http.StatusUnprocessableEntity)
	s.API(viewer, http.MethodPost, "/api/experiments/local/exposures", body).Must(t, http.StatusForbidden)
	s.API(stranger, http.MethodPost, "/api/experiments/local/exposures", body).Must(t, http.StatusNotFound)
	s.API(stranger, http.MethodGet, "/api/experiments/local/config", nil).Must(t, http.StatusNotFound)
	s.API(viewer, http.MethodGet, "/api/experiments/local/config?fields=all", nil).Must(t, http.StatusBadRequest)
}

package web_test

import (
	"encoding/json"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/finetune/finetunetest"
)

// trainCharts is the training charts' data on a job page.
type trainCharts struct {
	Step     []int      `json:"step"`
	Train    []*float64 `json:"train"`
	LR       []*float64 `json:"lr"`
	GradNorm []*float64 `json:"grad_norm"`
	Marks    []struct {
		Step  int    `json:"step"`
		Label string `json:"label"`
	} `json:"marks"`
}

// Every method's job page charts the learning rate and the gradient norm
// of each step beside its loss, from the metric events the worker stored:
// an SFT run, a reward model that stopped early and kept an earlier
// epoch (both marked on the loss chart and said above it), and a GRPO run.
func TestTrainChartsLearningRateAndGradNorm(t *testing.T) {
	s, src := localServer(t, 20*time.Millisecond)
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	chats := src.AddSFT(org, "support-sft v1", finetunetest.Chats(6), 2)
	pairs := src.AddPref(org, "support-dpo v1", finetunetest.Pairs(6), 2)
	model := localModel(t, s)
	s.User(org, "vic@acme.test", "viewer")
	vic := s.SignedIn("vic@acme.test")

	train := func(body map[string]any) (string, trainCharts) {
		t.Helper()
		var started struct {
			JobID string `json:"job_id"`
		}
		s.API(admin, http.MethodPost, "/api/train", body).Must(t, http.StatusCreated).JSON(t, &started)
		waitTrain(t, s, admin, started.JobID)
		page := vic.Get("/fine-tuning/jobs/"+started.JobID).Must(t, http.StatusOK)
		var lr, gn trainCharts
		if err := json.Unmarshal([]byte(attr(t, page.Body, "ft-lr-chart", "data-loss")), &lr); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(attr(t, page.Body, "ft-grad-norm-chart", "data-loss")), &gn); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(lr, gn) {
			t.Errorf("the two charts read different data: %+v and %+v", lr, gn)
		}
		// The live fragment brings the same charts.
		live := vic.Get("/fine-tuning/jobs/"+started.JobID+"/live").Must(t, http.StatusOK)
		if !strings.Contains(live.Body, `id="ft-lr-chart"`) || !strings.Contains(live.Body, `id="ft-grad-norm-chart"`) {
			t.Error("the live fragment has no learning rate or gradient norm chart")
		}
		return page.Body, lr
	}
	values := func(vs []*float64) []float64 {
		out := make([]float64, len(vs))
		for i, v := range vs {
			out[i] = math.NaN()
			if v != nil {
				out[i] = *v
			}
		}
		return out
	}
	same := func(got, want []float64) bool {
		if len(got) != len(want) {
			return false
		}
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-12 {
				return false
			}
		}
		return true
	}

	// SFT: the fake's steps 1–3 have lr 0.0002/step and grad_norm 1 + step/2.
	body, sft := train(map[string]any{"stage": "SFT", "model_id": model, "dataset_version_id": chats.ID.String()})
	if !reflect.DeepEqual(sft.Step, []int{1, 2, 3}) || !same(values(sft.LR), []float64{0.0002, 0.0001, 0.0002 / 3}) ||
		!same(values(sft.GradNorm), []float64{1.5, 2, 2.5}) || !same(values(sft.Train), []float64{2, 1.5, 1.25}) {
		t.Errorf("SFT charts %+v", sft)
	}
	metrics := regexpFind(t, `(?s)<table class="table" id="ft-metrics">(.*?)</table>`, body)
	if !strings.Contains(metrics, "<th class=\"num\">Learning rate</th>") || !strings.Contains(metrics, `<td class="num">0.0002</td><td class="num">1.5</td>`) {
		t.Errorf("metrics table %s", metrics)
	}
	if strings.Contains(body, `id="ft-kept"`) || strings.Contains(body, `id="ft-marks"`) {
		t.Error("an SFT run that kept its last epoch says otherwise")
	}

	// REWARD: three steps, stopped at step 3, the weights of epoch 1 (step 2) kept.
	body, rm := train(map[string]any{"stage": "REWARD", "model_id": model, "dataset_version_id": pairs.ID.String(),
		"hyperparameters": map[string]any{"early_stopping_patience": 1}})
	if !reflect.DeepEqual(rm.Step, []int{1, 2, 3}) || !same(values(rm.GradNorm), []float64{1.5, 2, 2.5}) || len(rm.Marks) != 2 ||
		rm.Marks[0].Step != 3 || !strings.HasPrefix(rm.Marks[0].Label, "stopped early: validation loss has not improved") ||
		rm.Marks[1].Step != 2 || rm.Marks[1].Label != "the kept model (epoch 1, validation loss 0.5)" {
		t.Errorf("reward charts %+v", rm)
	}
	if got := regexpFind(t, `id="ft-kept" role="status"><strong>Best model kept:</strong> ([^<]*)</p>`, body); got !=
		"the weights of epoch 1 (step 2), whose validation loss 0.5 was the lowest, rather than those of the last epoch." {
		t.Errorf("kept %q", got)
	}
	if marks := regexpFind(t, `(?s)<ul class="muted ft-marks" id="ft-marks">(.*?)</ul>`, body); !strings.Contains(marks, "<li>Step 2: the kept model") {
		t.Errorf("marks %s", marks)
	}

	// GRPO: four steps at lr 1e-5, grad_norm 0.25·step.
	_, grpo := train(map[string]any{"stage": "GRPO", "model_id": model, "dataset_version_id": chats.ID.String()})
	if !reflect.DeepEqual(grpo.Step, []int{1, 2, 3, 4}) || !same(values(grpo.LR), []float64{1e-5, 1e-5, 1e-5, 1e-5}) ||
		!same(values(grpo.GradNorm), []float64{0.25, 0.5, 0.75, 1}) {
		t.Errorf("GRPO charts %+v", grpo)
	}
}

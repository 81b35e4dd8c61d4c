package web_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/finetune/finetunetest"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/provider/openaitest"
	"github.com/curate/curate/web/webtest"
)

const ftMini = "gpt-4o-mini-2024-07-18"

// fineTuneServer starts Curate with workers, OpenAI pointed at the fake
// and an in-memory dataset source.
func fineTuneServer(t *testing.T, poll time.Duration) (*webtest.Server, *openaitest.Server, *finetunetest.Source) {
	t.Helper()
	fake := openaitest.New(t)
	s := webtest.New(t, webtest.Options{Workers: 2, Configure: func(c *cfgT) {
		c.OpenAIAPIKey, c.OpenAIBaseURL, c.FineTunePoll, c.FineTuneBudgetUSD = "sk-test", fake.URL(), poll, 100
	}})
	src := &finetunetest.Source{}
	s.App.FineTune.SetDataSource(src)
	return s, fake, src
}

type ftJob struct {
	ID             string   `json:"id"`
	Status         string   `json:"status"`
	FineTunedModel string   `json:"fine_tuned_model"`
	EstimatedCost  float64  `json:"estimated_cost_usd"`
	ActualCost     *float64 `json:"actual_cost_usd"`
	TrainedTokens  int64    `json:"trained_tokens"`
	Error          string   `json:"error"`
	Progress       struct {
		Step, TotalSteps int
		Fraction         *float64 `json:"fraction"`
	} `json:"progress"`
	Price *struct {
		ID            string  `json:"id"`
		USDPerMillion float64 `json:"usd_per_million_tokens"`
		EffectiveDate string  `json:"effective_date"`
	} `json:"price"`
	Metrics []struct {
		Step      int      `json:"step"`
		TrainLoss *float64 `json:"train_loss"`
		ValidLoss *float64 `json:"valid_loss"`
	} `json:"metrics"`
}

// Through the API: an admin key launches a DPO job, the workers take it to
// success against the fake, and the job reports its model, metrics and
// actual cost; the list filters; roles, budget, bad input and a cancel of
// an ended job are refused with clear messages.
func TestFineTuneAPI(t *testing.T) {
	s, fake, src := fineTuneServer(t, 20*time.Millisecond)
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	curator := s.APIKey(org, "helper", "curator")
	other := s.APIKey(s.Org("globex"), "ops", "admin")
	v := src.AddPref(org, "support-dpo v1", finetunetest.Pairs(6), 2)

	launch := map[string]any{"dataset_version_id": v.ID.String(), "provider": "openai", "base_model": ftMini, "method": "dpo",
		"hyperparameters": map[string]any{"beta": 0.1, "epochs": "auto"}, "suffix": "support"}
	s.API(curator, http.MethodPost, "/api/fine-tuning/jobs", launch).Must(t, http.StatusForbidden)

	var job ftJob
	s.API(admin, http.MethodPost, "/api/fine-tuning/jobs", launch).Must(t, http.StatusCreated).JSON(t, &job)
	// 4 training pairs × 18 tokens × 25 auto epochs at $3 per million.
	if job.EstimatedCost != 0.0054 {
		t.Errorf("estimated $%v, want $0.0054", job.EstimatedCost)
	}
	deadline := time.Now().Add(60 * time.Second)
	for job.Status != "succeeded" && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		s.API(admin, http.MethodGet, "/api/fine-tuning/jobs/"+job.ID, nil).Must(t, http.StatusOK).JSON(t, &job)
		if job.Status == "failed" {
			t.Fatalf("job failed: %s", job.Error)
		}
	}
	if job.Status != "succeeded" || job.FineTunedModel == "" || len(job.Metrics) != 4 {
		t.Fatalf("job %+v", job)
	}
	// The fake ran its script's 2 epochs where "auto" was estimated at 25:
	// 4 pairs × 18 tokens × 2 epochs at $3 per million.
	if job.ActualCost == nil || *job.ActualCost != 0.000432 || job.TrainedTokens != 144 {
		t.Errorf("actual cost %v for %d tokens, want $0.000432 for 144", job.ActualCost, job.TrainedTokens)
	}
	if fake.FilesCreated() != 2 || fake.JobsCreated() != 1 {
		t.Errorf("%d files and %d jobs at the provider", fake.FilesCreated(), fake.JobsCreated())
	}

	var list struct {
		Data []ftJob `json:"data"`
	}
	s.API(curator, http.MethodGet, "/api/fine-tuning/jobs?status=succeeded&provider=openai", nil).Must(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != job.ID {
		t.Errorf("filtered list %+v", list.Data)
	}
	s.API(curator, http.MethodGet, "/api/fine-tuning/jobs?status=done", nil).Must(t, http.StatusUnprocessableEntity)
	s.API(other, http.MethodGet, "/api/fine-tuning/jobs/"+job.ID, nil).Must(t, http.StatusNotFound)

	res := s.API(admin, http.MethodPost, "/api/fine-tuning/jobs/"+job.ID+"/cancel", nil).Must(t, http.StatusConflict)
	if !strings.Contains(res.Body, "nothing more is charged") {
		t.Errorf("cancel of an ended job: %s", res.Body)
	}

	bad := map[string]any{"dataset_version_id": v.ID.String(), "provider": "openai", "base_model": "gpt-3.5-turbo-0125", "method": "dpo",
		"hyperparameters": map[string]any{"epochs": 80}}
	res = s.API(admin, http.MethodPost, "/api/fine-tuning/jobs", bad).Must(t, http.StatusUnprocessableEntity)
	for _, field := range []string{`"field":"method"`, `"field":"hyperparameters.epochs"`} {
		if !strings.Contains(res.Body, field) {
			t.Errorf("bad launch answer lacks %s: %s", field, res.Body)
		}
	}
}

// The pages: the estimate updates from the form; a launch over the budget
// is refused beside the form with the figures; viewers see the dashboard
// but not the launch form.
func TestFineTunePages(t *testing.T) {
	s, _, src := fineTuneServer(t, time.Hour)
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	s.User(org, "vic@acme.test", "viewer")
	v := src.AddPref(org, "support-dpo v1", finetunetest.Pairs(6), 2)
	c := s.SignedIn("ada@acme.test")

	page := c.Get("/fine-tuning/new").Must(t, http.StatusOK)
	if !strings.Contains(page.Body, "support-dpo v1") {
		t.Fatal("the form does not offer the dataset version")
	}
	form := url.Values{"dataset_version_id": {v.ID.String()}, "provider": {"openai"}, "base_model": {ftMini}, "method": {"dpo"},
		"hyperparameters.epochs": {"2"}}
	est := c.PostForm("/fine-tuning/estimate", form).Must(t, http.StatusOK)
	// 72 tokens per epoch × 2 epochs = 144 tokens at $3 per million.
	if !strings.Contains(est.Body, `id="est-tokens">144<`) || !strings.Contains(est.Body, "$0.0004") {
		t.Errorf("estimate: %s", est.Body)
	}
	form.Set("hyperparameters.epochs", "99")
	est = c.PostForm("/fine-tuning/estimate", form).Must(t, http.StatusOK)
	if !strings.Contains(est.Body, `id="err-hyperparameters-epochs" hx-swap-oob="true">must be`) {
		t.Errorf("no inline message for epochs: %s", est.Body)
	}

	c.PostForm("/fine-tuning/budget", url.Values{"monthly_budget": {"0.0001"}}).Must(t, http.StatusSeeOther)
	form.Set("hyperparameters.epochs", "2")
	res := c.PostForm("/fine-tuning/jobs", form).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, "exceeds the $0.0001 left") || !strings.Contains(res.Body, "$0.0004") {
		t.Errorf("over-budget launch: %s", regexpFind(t, `(?s)(id="err-budget".{0,300})`, res.Body))
	}
	var n int
	if err := s.Pool.QueryRow(t.Context(), "SELECT count(*) FROM fine_tuning_jobs").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d jobs stored after the refusal", n)
	}
	assertAudit(t, s, "finetune.budget")

	viewer := s.SignedIn("vic@acme.test")
	viewer.Get("/fine-tuning").Must(t, http.StatusOK)
	viewer.Get("/fine-tuning/new").Must(t, http.StatusForbidden)

	// Within the budget the launch goes through; the worker then waits an
	// hour between looks, and cancelling wakes it at once.
	c.PostForm("/fine-tuning/budget", url.Values{"monthly_budget": {"50"}}).Must(t, http.StatusSeeOther)
	res = c.PostForm("/fine-tuning/jobs", form).Must(t, http.StatusSeeOther)
	jobURL := res.Header.Get("Location")
	page = c.Get(jobURL).Must(t, http.StatusOK)
	if !strings.Contains(page.Body, `id="ft-cancel"`) || !strings.Contains(page.Body, "support-dpo v1") {
		t.Fatal("the job page has no cancel form or dataset version")
	}
	viewer.PostForm(jobURL+"/cancel", url.Values{}).Must(t, http.StatusForbidden)
	// Cancel once the worker waits for the provider to process the files.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var state string
		if err := s.Pool.QueryRow(t.Context(), "SELECT state::text FROM river_job WHERE kind = 'finetune_advance'").Scan(&state); err != nil {
			t.Fatal(err)
		}
		if state == "scheduled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker is %s, never waiting", state)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.PostForm(jobURL+"/cancel", url.Values{}).Must(t, http.StatusSeeOther)
	for {
		var status string
		if err := s.Pool.QueryRow(t.Context(), "SELECT status FROM fine_tuning_jobs").Scan(&status); err != nil {
			t.Fatal(err)
		}
		if status == "cancelled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job is still %s after cancelling", status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if page := c.Get(jobURL).Must(t, http.StatusOK); strings.Contains(page.Body, `id="ft-cancel"`) || strings.Contains(page.Body, "every 2s") {
		t.Error("a cancelled job still offers cancelling or keeps polling")
	}
	assertAudit(t, s, "finetune.launch", "finetune.cancel")
}

// Prices belong to their organisation. An admin of one sets gpt-4o-mini to
// $1000 per million on the settings page, which then shows the new price
// with its date and who set it, and that organisation's estimate names
// it; another organisation's launch is still estimated, and recorded, at
// its own $3 price. A curator cannot change prices.
func TestFineTunePricesPerOrganisation(t *testing.T) {
	s, _, src := fineTuneServer(t, time.Hour)
	acme, globex := s.Org("acme"), s.Org("globex")
	s.User(acme, "ada@acme.test", "admin")
	s.User(acme, "cy@acme.test", "curator")
	vA := src.AddPref(acme, "acme-dpo v1", finetunetest.Pairs(6), 2)
	vB := src.AddPref(globex, "globex-dpo v1", finetunetest.Pairs(6), 2)
	ada := s.SignedIn("ada@acme.test")

	page := ada.Get("/fine-tuning/settings").Must(t, http.StatusOK)
	if !strings.Contains(page.Body, `value="`+ftMini+`"`) || !strings.Contains(page.Body, pricing.DefaultsDate) || !strings.Contains(page.Body, pricing.DefaultsSetBy) {
		t.Fatalf("the settings page does not show the default prices with their date and origin")
	}
	form := url.Values{"date": {"2026-01-15"}}
	for _, p := range pricing.Defaults().Prices {
		price := p.PerMillion
		if p.BaseModel == ftMini {
			price = 1000
		}
		form.Add("provider", p.Provider)
		form.Add("base_model", p.BaseModel)
		form.Add("usd_per_million", strconv.FormatFloat(price, 'f', -1, 64))
	}
	s.SignedIn("cy@acme.test").PostForm("/fine-tuning/prices", form).Must(t, http.StatusForbidden)
	ada.PostForm("/fine-tuning/prices", form).Must(t, http.StatusSeeOther)

	page = ada.Get("/fine-tuning/settings").Must(t, http.StatusOK)
	row := regexpFind(t, `(?s)(value="`+ftMini+`".*?</tr>)`, page.Body)
	for _, want := range []string{`value="1000"`, "2026-01-15", "ada@acme.test"} {
		if !strings.Contains(row, want) {
			t.Errorf("the changed price's row lacks %s: %s", want, row)
		}
	}
	// 72 tokens per epoch × 2 epochs at $1000 per million.
	est := ada.PostForm("/fine-tuning/estimate", url.Values{"dataset_version_id": {vA.ID.String()}, "provider": {"openai"},
		"base_model": {ftMini}, "method": {"dpo"}, "hyperparameters.epochs": {"2"}}).Must(t, http.StatusOK)
	if !strings.Contains(est.Body, "$0.1440") || !strings.Contains(regexpFind(t, `(?s)(<dd id="est-price".*?</dd>)`, est.Body), "effective 2026-01-15, set by ada@acme.test") {
		t.Errorf("acme's estimate does not use its new price: %s", est.Body)
	}

	var job ftJob
	s.API(s.APIKey(globex, "ops", "admin"), http.MethodPost, "/api/fine-tuning/jobs", map[string]any{"dataset_version_id": vB.ID.String(),
		"provider": "openai", "base_model": ftMini, "method": "dpo"}).Must(t, http.StatusCreated).JSON(t, &job)
	if job.EstimatedCost != 0.0054 || job.Price == nil || job.Price.USDPerMillion != 3 || job.Price.EffectiveDate != pricing.DefaultsDate {
		t.Errorf("globex's launch: $%v at %+v, want $0.0054 at its own $3 price of %s", job.EstimatedCost, job.Price, pricing.DefaultsDate)
	}
	var n int
	if err := s.Pool.QueryRow(t.Context(), "SELECT count(*) FROM audit_log WHERE action = 'finetune.prices' AND actor_label = 'ada@acme.test' AND org_id = $1", acme).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d audited price changes by ada (%v), want 1", n, err)
	}
}

package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/finetune/finetunetest"
	"github.com/curate/curate/web/webtest"
)

// estimatePanel is the estimate aside of a launch page or an estimate
// answer.
func estimatePanel(t *testing.T, body string) string {
	t.Helper()
	return regexpFind(t, `(?s)(<aside id="estimate".*?</aside>)`, body)
}

// The estimate says what is missing instead of going silent: on a fresh
// form, the dataset version; while typing, each bad field in words.
func TestFineTuneEstimateSaysWhatIsMissing(t *testing.T) {
	t.Parallel()
	s, _, src := fineTuneServer(t, time.Hour)
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	v := src.AddPref(org, "support-dpo v1", finetunetest.Pairs(6), 2)
	c := s.SignedIn("ada@acme.test")

	panel := estimatePanel(t, c.Get("/fine-tuning/new").Must(t, http.StatusOK).Body)
	if !strings.Contains(panel, `id="est-missing"`) || !strings.Contains(panel, "<li>Choose a frozen dataset version.</li>") {
		t.Errorf("a fresh form's estimate does not say a version is missing: %s", panel)
	}

	form := url.Values{"dataset_version_id": {v.ID.String()}, "provider": {"openai"}, "base_model": {ftMini}, "method": {"dpo"},
		"hyperparameters.epochs": {"99"}, "suffix": {"bad suffix!"}}
	panel = estimatePanel(t, c.PostForm("/fine-tuning/estimate", form).Must(t, http.StatusOK).Body)
	for _, want := range []string{"<li>Epochs must be a whole number from 1 to 50, or auto.</li>", "<li>Suffix: at most 24 letters and digits"} {
		if !strings.Contains(panel, want) {
			t.Errorf("estimate lacks %q: %s", want, panel)
		}
	}
	if strings.Contains(panel, `id="est-cost"`) {
		t.Error("an invalid request shows a cost")
	}

	form.Set("hyperparameters.epochs", "2")
	form.Set("suffix", "")
	panel = estimatePanel(t, c.PostForm("/fine-tuning/estimate", form).Must(t, http.StatusOK).Body)
	if !strings.Contains(panel, `id="est-tokens">144<`) || strings.Contains(panel, `id="est-missing"`) {
		t.Errorf("a valid request's estimate: %s", panel)
	}
}

// A refused launch comes back as typed, with the field's message and the
// estimate of what was typed: never $0.00 of $0.00.
func TestFineTuneRefusedLaunchKeepsInputAndEstimate(t *testing.T) {
	t.Parallel()
	s, _, src := fineTuneServer(t, time.Hour)
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	v := src.AddPref(org, "support-dpo v1", finetunetest.Pairs(6), 2)
	c := s.SignedIn("ada@acme.test")

	// The seed cannot be read, the rest is fine: the estimate stands.
	form := url.Values{"dataset_version_id": {v.ID.String()}, "provider": {"openai"}, "base_model": {ftMini}, "method": {"dpo"},
		"hyperparameters.epochs": {"2"}, "seed": {"forty-two"}, "suffix": {"support"}}
	body := c.PostForm("/fine-tuning/jobs", form).Must(t, http.StatusUnprocessableEntity).Body
	panel := estimatePanel(t, body)
	if !strings.Contains(panel, `id="est-tokens">144<`) || !strings.Contains(panel, "<strong>$0.0004</strong>") {
		t.Errorf("the refused launch lost its estimate: %s", panel)
	}
	if strings.Contains(panel, "$0.00 ") || strings.Contains(panel, ">$0.00<") {
		t.Errorf("the refused launch shows zeros: %s", panel)
	}
	if !strings.Contains(panel, "<li>Seed must be a whole number, or empty.</li>") {
		t.Errorf("the estimate does not say why: %s", panel)
	}
	for _, want := range []string{`value="forty-two"`, `value="support"`, `value="` + ftMini + `"`,
		`id="err-seed">must be a whole number`} {
		if !strings.Contains(body, want) {
			t.Errorf("the refused form lacks %s", want)
		}
	}

	// Epochs out of range: no estimate can be made, and the panel says why.
	form.Set("seed", "")
	form.Set("hyperparameters.epochs", "99")
	panel = estimatePanel(t, c.PostForm("/fine-tuning/jobs", form).Must(t, http.StatusUnprocessableEntity).Body)
	if strings.Contains(panel, "$0.00") || !strings.Contains(panel, "<li>Epochs must be a whole number from 1 to 50, or auto.</li>") {
		t.Errorf("refused for epochs, the estimate shows: %s", panel)
	}
	var n int
	if err := s.Pool.QueryRow(t.Context(), "SELECT count(*) FROM fine_tuning_jobs").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d jobs stored after refusals", n)
	}
}

// Without credentials OpenAI and Bedrock are offered disabled, saying so,
// and a launch naming one is refused beside the provider field.
func TestFineTuneProvidersWithoutCredentialsAreDisabled(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	src := &finetunetest.Source{}
	s.App.FineTune.SetDataSource(src)
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	v := src.AddSFT(org, "support v1", finetunetest.Chats(12), 2)
	c := s.SignedIn("ada@acme.test")

	body := c.Get("/fine-tuning/new").Must(t, http.StatusOK).Body
	for _, p := range []string{"openai", "bedrock"} {
		if !regexp.MustCompile(`<option value="` + p + `" disabled[^>]*>[^<]*\(credentials not configured\)</option>`).MatchString(body) {
			t.Errorf("%s is not offered disabled: %s", p, regexpFind(t, `(?s)(<select name="provider">.*?</select>)`, body))
		}
	}
	form := url.Values{"dataset_version_id": {v.ID.String()}, "provider": {"openai"}, "base_model": {ftMini}, "method": {"supervised"}}
	res := c.PostForm("/fine-tuning/jobs", form).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, `id="err-provider">OpenAI cannot be used here: credentials not configured`) {
		t.Errorf("launch at an unconfigured provider: %s", regexpFind(t, `(?s)(id="err-provider".{0,200})`, res.Body))
	}
	if strings.Contains(res.Body, "OPENAI_API_KEY") || strings.Contains(res.Body, "S3 bucket") {
		t.Error("the page shows the client's own error")
	}
}

// Local GPU is disabled with a sentence naming what is missing when the
// only live worker's probe says it cannot train, whatever this web
// server's own machine has; the API refuses it too.
func TestFineTuneLocalDisabledByProbe(t *testing.T) {
	t.Parallel()
	s, src := localServerWith(t, 0, time.Hour)
	startGPUWorker(t, s, fakeTrainer(t), "FAKE_TRAINER_PROBE=no-torch")
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	v := src.AddPref(org, "support-dpo v1", finetunetest.Pairs(6), 2)
	c := s.SignedIn("ada@acme.test")

	body := c.Get("/fine-tuning/new").Must(t, http.StatusOK).Body
	if !strings.Contains(body, `<option value="local" disabled>Local GPU (No live GPU worker has torch.)</option>`) {
		t.Errorf("local is not disabled with the probe's reason: %s", regexpFind(t, `(?s)(<select name="provider">.*?</select>)`, body))
	}
	if !strings.Contains(body, `id="ft-device">none (no torch) on `) {
		t.Errorf("the form does not say the worker's device: %s", regexpFind(t, `(?s)(id="ft-device".{0,200})`, body))
	}
	key := s.APIKey(org, "ops", "admin")
	res := s.API(key, http.MethodPost, "/api/fine-tuning/jobs", map[string]any{"dataset_version_id": v.ID.String(), "provider": "local",
		"base_model": "model", "method": "dpo"}).Must(t, http.StatusUnprocessableEntity)
	if !strings.Contains(res.Body, "Local GPU cannot take this job: no live GPU worker has torch") {
		t.Errorf("the API launched where no worker can train: %s", res.Body)
	}
}

// Jobs are named by their dataset version and suffix, or "ft-N" for the
// Nth on that version; the name heads the job page and the list.
func TestFineTuneJobNames(t *testing.T) {
	t.Parallel()
	s, _, src := fineTuneServer(t, time.Hour)
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	v := src.AddPref(org, "support-dpo v1", finetunetest.Pairs(6), 2)
	c := s.SignedIn("ada@acme.test")

	form := url.Values{"dataset_version_id": {v.ID.String()}, "provider": {"openai"}, "base_model": {ftMini}, "method": {"dpo"},
		"hyperparameters.epochs": {"1"}, "suffix": {"support"}}
	named := c.PostForm("/fine-tuning/jobs", form).Must(t, http.StatusSeeOther).Header.Get("Location")
	form.Del("suffix")
	unnamed := c.PostForm("/fine-tuning/jobs", form).Must(t, http.StatusSeeOther).Header.Get("Location")

	for loc, want := range map[string]string{named: "support-dpo v1 · support", unnamed: "support-dpo v1 · ft-2"} {
		page := c.Get(loc).Must(t, http.StatusOK).Body
		if !strings.Contains(page, `<h1 id="ft-name">`+want+`</h1>`) {
			t.Errorf("job page %s is not headed %q: %s", loc, want, regexpFind(t, `(<h1[^>]*>[^<]*</h1>)`, page))
		}
	}
	list := c.Get("/fine-tuning").Must(t, http.StatusOK).Body
	for _, want := range []string{">support-dpo v1 · support</a>", ">support-dpo v1 · ft-2</a>"} {
		if !strings.Contains(list, want) {
			t.Errorf("the jobs list lacks %s", want)
		}
	}
}

// The dataset page offers, for validation and export, only the formats
// that fit the dataset's kind: a preference dataset the formats that keep
// the rejected reply, an instruction dataset those that hold one example.
func TestDatasetFormatsFilteredByKind(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	s.User(org, "cora@acme.test", "curator")
	c := s.SignedIn("cora@acme.test")
	options := func(body string) string {
		sel := regexpFind(t, `(?s)id="report".*?(<select name="format">.*?</select>)`, body)
		var vals []string
		for _, m := range regexp.MustCompile(`<option value="([a-z_]+)"`).FindAllStringSubmatch(sel, -1) {
			vals = append(vals, m[1])
		}
		return strings.Join(vals, ",")
	}
	for _, tc := range []struct{ typ, want string }{
		{"preference_pairs", "openai_preference,trl_preference,parquet"},
		{"instruction_tuning", "openai_chat,bedrock_chat,anthropic_text,sharegpt,alpaca,parquet"},
	} {
		loc := c.PostForm("/datasets", url.Values{"name": {tc.typ}, "dataset_type": {tc.typ}}).Must(t, http.StatusSeeOther).Header.Get("Location")
		if got := options(c.Get(loc).Must(t, http.StatusOK).Body); got != tc.want {
			t.Errorf("a %s dataset offers %s, want %s", tc.typ, got, tc.want)
		}
	}
}

package finetune_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/finetune/finetunetest"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/keyset"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/bedrock"
	"github.com/curate/curate/internal/provider/bedrocktest"
	"github.com/curate/curate/internal/provider/openai"
	"github.com/curate/curate/internal/provider/openaitest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	mini  = "gpt-4o-mini-2024-07-18" // $3 per million training tokens in the default table
	haiku = "anthropic.claude-3-haiku-20240307-v1:0:200k"
)

// admin is the launching user; newEnv creates them.
var admin = audit.Actor{Kind: "user", ID: uuid.MustParse("0b6f1d7e-2c1a-4e8b-9f3a-5d2c7e8a9b10"), Label: "ada@acme.test"}

type env struct {
	svc  *finetune.Service
	pool *pgxpool.Pool
	src  *finetunetest.Source
	org  uuid.UUID
}

func newEnv(t *testing.T, reg finetune.Providers) *env {
	t.Helper()
	pool := pgtest.NewDB(t)
	var org uuid.UUID
	if err := pool.QueryRow(context.Background(), "INSERT INTO organizations (slug, name) VALUES ('acme', 'Acme') RETURNING id").Scan(&org); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), "INSERT INTO users (id, org_id, email, password_hash, role) VALUES ($1, $2, $3, 'x', 'admin')",
		admin.ID, org, admin.Label); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := &finetunetest.Source{}
	// An insert-only River client: launches store their worker's job, which
	// no worker here takes; the tests advance jobs themselves.
	inserter, err := jobq.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	svc := &finetune.Service{Pool: pool, Providers: reg, Dir: filepath.Join(dir, "ft"), DefaultBudget: pricing.Dollars(100),
		PollEvery: time.Millisecond, Jobs: inserter}
	svc.SetDataSource(src)
	return &env{svc: svc, pool: pool, src: src, org: org}
}

func openaiEntry(srv *openaitest.Server) finetune.Entry {
	// No SDK retries: a failed request reaches the worker, which retries.
	return finetune.OpenAI(openai.Config{APIKey: "sk-test", BaseURL: srv.URL(), MaxRetries: -1})
}

func bedrockEntry(srv *bedrocktest.Server) finetune.Entry {
	return finetune.Bedrock(bedrock.Config{
		Bucket: bedrocktest.Bucket, Prefix: "ft", RoleARN: "arn:aws:iam::123456789012:role/curate",
		BedrockEndpoint: srv.BedrockURL(), S3Endpoint: srv.S3URL(), S3PathStyle: true,
		AWS: &aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
			Retryer: func() aws.Retryer { return aws.NopRetryer{} }},
	})
}

func (e *env) launch(t *testing.T, req finetune.Request) db.FineTuningJob {
	t.Helper()
	job, _, err := e.svc.Launch(context.Background(), admin, e.org, req)
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// run advances the job until it ends, as retried workers would: an error
// ends one attempt and the next resumes from the stored state.
func (e *env) run(t *testing.T, id uuid.UUID) (steps []finetune.Step, errs []error) {
	t.Helper()
	for range 200 {
		out, err := e.svc.Advance(context.Background(), id)
		steps = append(steps, out.Step)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if out.Done {
			return steps, errs
		}
	}
	t.Fatalf("job %s did not end in 200 steps: %v", id, steps)
	return nil, nil
}

func (e *env) job(t *testing.T, id uuid.UUID) finetune.Detail {
	t.Helper()
	d, err := e.svc.Get(context.Background(), e.org, id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// killer stands in for the provider and dies once, right after the
// provider has done the chosen call and before its answer can be stored:
// the worst moment for a worker to die.
type killer struct {
	provider.Provider
	at   string
	dead bool
}

var errKilled = errors.New("worker killed")

func (k *killer) die(op string) error {
	if op == k.at && !k.dead {
		k.dead = true
		return errKilled
	}
	return nil
}

func (k *killer) Upload(ctx context.Context, r provider.UploadRequest) (provider.UploadResult, error) {
	res, err := k.Provider.Upload(ctx, r)
	if err == nil {
		err = k.die("Upload")
	}
	return res, err
}

func (k *killer) WaitUploaded(ctx context.Context, f provider.UploadResult) (bool, error) {
	ok, err := k.Provider.WaitUploaded(ctx, f)
	if err == nil && ok {
		err = k.die("WaitUploaded")
	}
	return ok, err
}

func (k *killer) FindJob(ctx context.Context, id string) (provider.Job, bool, error) {
	j, found, err := k.Provider.FindJob(ctx, id)
	if err == nil {
		err = k.die("FindJob")
	}
	return j, found, err
}

func (k *killer) Create(ctx context.Context, r provider.CreateRequest) (provider.Job, error) {
	j, err := k.Provider.Create(ctx, r)
	if err == nil {
		err = k.die("Create")
	}
	return j, err
}

func (k *killer) Poll(ctx context.Context, id string, c provider.EventCursor) (provider.PollResult, error) {
	r, err := k.Provider.Poll(ctx, id, c)
	if err == nil && r.Status.State == provider.StateRunning {
		err = k.die("Poll")
	}
	return r, err
}

func (k *killer) Metrics(ctx context.Context, id string) ([]provider.StepMetric, error) {
	m, err := k.Provider.Metrics(ctx, id)
	if err == nil {
		err = k.die("Metrics")
	}
	return m, err
}

func killing(e finetune.Entry, at string) finetune.Entry {
	inner := e.New
	e.New = func(ctx context.Context) (provider.Provider, error) {
		p, err := inner(ctx)
		if err != nil {
			return nil, err
		}
		return &killer{Provider: p, at: at}, nil
	}
	return e
}

var killPoints = []string{"", "Upload", "WaitUploaded", "FindJob", "Create", "Poll", "Metrics"}

// A worker killed between every pair of steps, right after the provider
// acted, resumes from what it stored: OpenAI holds two files (train and
// validation) and one job, and the DPO job ends with its model, metrics
// and cost.
func TestOpenAIDPOSurvivesAKillAtEveryStep(t *testing.T) {
	for _, at := range killPoints {
		t.Run("kill after "+at, func(t *testing.T) {
			t.Parallel()
			srv := openaitest.New(t)
			e := newEnv(t, finetune.Providers{"openai": killing(openaiEntry(srv), at)})
			v := e.src.AddPref(e.org, "support-dpo v1", finetunetest.Pairs(6), 2)
			job := e.launch(t, finetune.Request{VersionID: v.ID, Provider: "openai", BaseModel: mini, Method: provider.DPO,
				Hyper: provider.Hyperparameters{Beta: provider.Num(0.1)}, Suffix: "support"})

			_, errs := e.run(t, job.ID)
			wantErrs := 0
			if at != "" {
				wantErrs = 1
			}
			if len(errs) != wantErrs || (wantErrs == 1 && !errors.Is(errs[0], errKilled)) {
				t.Fatalf("errors %v, want %d kill", errs, wantErrs)
			}
			if n := srv.FilesCreated(); n != 2 {
				t.Errorf("OpenAI holds %d files, want 2", n)
			}
			if n := srv.JobsCreated(); n != 1 {
				t.Errorf("OpenAI holds %d jobs, want 1", n)
			}
			d := e.job(t, job.ID)
			j := d.Job
			if j.Status != db.FinetuneStatusSucceeded || j.FineTunedModel == "" || j.ErrorMessage != "" {
				t.Fatalf("job ended %s, model %q, error %q", j.Status, j.FineTunedModel, j.ErrorMessage)
			}
			// The default script: 4 steps over 2 epochs; OpenAI bills the 4
			// training pairs' 18 tokens each per epoch (the 2 validation pairs
			// are free): 144 tokens at $3 per million.
			if len(d.Metrics) != 4 || d.Metrics[3].TrainLoss.Float64 != 0.5 || d.Metrics[3].ValidLoss.Float64 != 0.625 {
				t.Errorf("metrics %+v, want 4 steps ending at train loss 0.5, valid loss 0.625", d.Metrics)
			}
			if j.TrainedTokens != 144 || !j.ActualCost.Valid || j.ActualCost.Int64 != 144*3 {
				t.Errorf("trained %d tokens costing %v micro-dollars, want 144 and %d", j.TrainedTokens, j.ActualCost, 144*3)
			}
			if len(d.Checkpoints) == 0 || len(d.Events) == 0 {
				t.Errorf("%d checkpoints and %d events stored", len(d.Checkpoints), len(d.Events))
			}
			if j.Step != 4 || j.TotalSteps != 4 {
				t.Errorf("progress %d/%d, want 4/4", j.Step, j.TotalSteps)
			}
		})
	}
}

// The same at Bedrock: two objects in S3 and one customization job.
func TestBedrockSurvivesAKillAtEveryStep(t *testing.T) {
	for _, at := range killPoints {
		t.Run("kill after "+at, func(t *testing.T) {
			t.Parallel()
			srv := bedrocktest.New(t)
			e := newEnv(t, finetune.Providers{"bedrock": killing(bedrockEntry(srv), at)})
			v := e.src.AddSFT(e.org, "support-sft v2", finetunetest.Chats(5), 1)
			job := e.launch(t, finetune.Request{VersionID: v.ID, Provider: "bedrock", BaseModel: haiku, Method: provider.Supervised,
				Hyper: provider.Hyperparameters{Epochs: provider.Num(2)}})
			if _, errs := e.run(t, job.ID); (at == "") != (len(errs) == 0) {
				t.Fatalf("errors %v with a kill after %q", errs, at)
			}
			if n := srv.ObjectsCreated(); n != 2 {
				t.Errorf("S3 holds %d objects, want 2", n)
			}
			if n := srv.JobsCreated(); n != 1 {
				t.Errorf("Bedrock holds %d jobs, want 1", n)
			}
			d := e.job(t, job.ID)
			if d.Job.Status != db.FinetuneStatusSucceeded || d.Job.FineTunedModel == "" {
				t.Fatalf("job ended %s with model %q: %s", d.Job.Status, d.Job.FineTunedModel, d.Job.ErrorMessage)
			}
			// Bedrock's default script: training steps 0-3, validation at 1 and 3.
			if len(d.Metrics) != 4 || d.Metrics[3].TrainLoss.Float64 != 1 || d.Metrics[3].ValidLoss.Float64 != 1.5 {
				t.Errorf("metrics %+v", d.Metrics)
			}
		})
	}
}

// The estimate counts by hand: a pair "hello" -> "4" / "5" is 3 tokens of
// reply priming plus 3 framing tokens, a role token and a content token
// for each of the prompt, the chosen and the rejected reply: 18 tokens.
// Four training pairs (two of six validate) make 72 tokens per epoch; with
// epochs auto OpenAI's cookbook runs 100/4 = 25 epochs: 1,800 tokens at $3
// per million is $0.0054.
func TestEstimateCountsTokensEpochsAndPrice(t *testing.T) {
	srv := openaitest.New(t)
	e := newEnv(t, finetune.Providers{"openai": openaiEntry(srv)})
	v := e.src.AddPref(e.org, "p v1", finetunetest.Pairs(6), 2)
	chats := e.src.AddSFT(e.org, "c v1", finetunetest.Chats(3), 0)
	cases := []struct {
		name       string
		req        finetune.Request
		perEpoch   int64
		epochs     int
		costMicros pricing.Micros
	}{
		{"dpo auto epochs", finetune.Request{VersionID: v.ID, Provider: "openai", BaseModel: mini, Method: provider.DPO}, 72, 25, 5400},
		{"dpo 2 epochs", finetune.Request{VersionID: v.ID, Provider: "openai", BaseModel: mini, Method: provider.DPO,
			Hyper: provider.Hyperparameters{Epochs: provider.Num(2)}}, 72, 2, 432},
		// "hello" -> "hi": 3 + 5 + 5 = 13 tokens, three examples, 3 epochs, at $25 per million.
		{"sft gpt-4o", finetune.Request{VersionID: chats.ID, Provider: "openai", BaseModel: "gpt-4o-2024-08-06", Method: provider.Supervised,
			Hyper: provider.Hyperparameters{Epochs: provider.Num(3)}}, 39, 3, 39 * 3 * 25},
	}
	for _, c := range cases {
		est, err := e.svc.Estimate(context.Background(), e.org, c.req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if est.TokensPerEpoch != c.perEpoch || est.Epochs != c.epochs || est.Cost != c.costMicros {
			t.Errorf("%s: %d tokens × %d epochs = %s; want %d × %d = %s", c.name, est.TokensPerEpoch, est.Epochs, est.Cost, c.perEpoch, c.epochs, c.costMicros)
		}
		if est.Budget.Monthly != pricing.Dollars(100) || est.Price.Date != pricing.DefaultsDate || est.Price.ID == uuid.Nil {
			t.Errorf("%s: budget %s, price %+v", c.name, est.Budget.Monthly, est.Price)
		}
	}
}

func TestOpenAIAutoEpochsFollowsTheCookbook(t *testing.T) {
	for _, c := range []struct{ n, want int }{{1, 25}, {4, 25}, {10, 10}, {34, 3}, {100, 3}, {8333, 3}, {8334, 2}, {30000, 1}} {
		if got := openai.AutoEpochs(c.n); got != c.want {
			t.Errorf("%d examples: %d epochs, want %d", c.n, got, c.want)
		}
	}
}

// Each bad launch is refused with a message on its field, and nothing is
// stored or sent.
func TestLaunchRefusesBadInput(t *testing.T) {
	srv := openaitest.New(t)
	reg := finetune.Providers{
		"openai":  openaiEntry(srv),
		"bedrock": finetune.Bedrock(bedrock.Config{}), // no bucket, role or credentials
	}
	e := newEnv(t, reg)
	pairs := e.src.AddPref(e.org, "p v1", finetunetest.Pairs(4), 1)
	chats := e.src.AddSFT(e.org, "c v1", finetunetest.Chats(4), 1)
	bad := e.src.AddInvalid(e.org, "broken v1", "12 examples have no assistant reply")
	ok := finetune.Request{VersionID: pairs.ID, Provider: "openai", BaseModel: mini, Method: provider.DPO}
	with := func(f func(*finetune.Request)) finetune.Request { r := ok; f(&r); return r }
	cases := []struct {
		name  string
		req   finetune.Request
		field string
	}{
		{"version failed validation", with(func(r *finetune.Request) { r.VersionID = bad.ID }), "dataset_version_id"},
		{"unknown version", with(func(r *finetune.Request) { r.VersionID = uuid.New() }), "dataset_version_id"},
		{"unknown dataset", with(func(r *finetune.Request) { r.VersionID, r.DatasetID = uuid.Nil, uuid.New() }), "dataset_id"},
		{"dataset failed validation", with(func(r *finetune.Request) { r.VersionID, r.DatasetID = uuid.Nil, bad.DatasetID }), "dataset_id"},
		{"version of another dataset", with(func(r *finetune.Request) { r.DatasetID = chats.DatasetID }), "dataset_version_id"},
		{"base model without dpo", with(func(r *finetune.Request) { r.BaseModel = "gpt-3.5-turbo-0125" }), "method"},
		{"dpo on single examples", with(func(r *finetune.Request) { r.VersionID = chats.ID }), "method"},
		{"epochs out of range", with(func(r *finetune.Request) { r.Hyper.Epochs = provider.Num(51) }), "hyperparameters.epochs"},
		{"beta out of range", with(func(r *finetune.Request) { r.Hyper.Beta = provider.Num(2.5) }), "hyperparameters.beta"},
		{"unknown model", with(func(r *finetune.Request) { r.BaseModel = "gpt-2" }), "base_model"},
		{"bad suffix", with(func(r *finetune.Request) { r.Suffix = "no spaces allowed" }), "suffix"},
		{"unknown provider", with(func(r *finetune.Request) { r.Provider = "acme" }), "provider"},
		{"missing credential", with(func(r *finetune.Request) {
			r.Provider, r.BaseModel, r.Method, r.VersionID = "bedrock", haiku, provider.Supervised, chats.ID
		}), "provider"},
		{"seed at bedrock", with(func(r *finetune.Request) {
			seed := int64(7)
			r.Provider, r.BaseModel, r.Method, r.VersionID, r.Seed = "bedrock", haiku, provider.Supervised, chats.ID, &seed
		}), "seed"},
	}
	for _, c := range cases {
		_, _, err := e.svc.Launch(context.Background(), admin, e.org, c.req)
		var inv *errs.Invalid
		if !errors.As(err, &inv) {
			t.Errorf("%s: %v, want invalid input", c.name, err)
			continue
		}
		if _, ok := inv.ByField()[c.field]; !ok {
			t.Errorf("%s: messages %v, want one on %s", c.name, inv.Errors, c.field)
		}
	}
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM fine_tuning_jobs").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d jobs stored (%v), want none", n, err)
	}
	if srv.FilesCreated() != 0 || srv.JobsCreated() != 0 {
		t.Errorf("the provider was called")
	}
}

// A launch may name a dataset instead of a version, and leave out the base
// model: it trains the dataset's newest version on the provider's default
// model, and the job records both.
func TestLaunchByDatasetWithDefaultModel(t *testing.T) {
	srv := openaitest.New(t)
	e := newEnv(t, finetune.Providers{"openai": openaiEntry(srv)})
	v := e.src.AddPref(e.org, "p v1", finetunetest.Pairs(6), 2)
	job := e.launch(t, finetune.Request{DatasetID: v.DatasetID, Provider: "openai", Method: provider.DPO,
		Hyper: provider.Hyperparameters{Epochs: provider.Num(1)}})
	hyper, _ := json.Marshal(finetune.ToObject(job, openai.Spelling).Hyperparameters)
	if job.DatasetVersionID != v.ID || job.BaseModel != mini || string(hyper) != `{"n_epochs":1}` || !job.RiverJobID.Valid {
		t.Fatalf("job on version %s, model %q, hyperparameters %s, river job %v; want version %s, model %s, n_epochs 1",
			job.DatasetVersionID, job.BaseModel, hyper, job.RiverJobID, v.ID, mini)
	}
	var kind, args string
	if err := e.pool.QueryRow(context.Background(), "SELECT kind, args::text FROM river_job WHERE id = $1", job.RiverJobID.Int64).Scan(&kind, &args); err != nil {
		t.Fatal(err)
	}
	if kind != (finetune.JobArgs{}).Kind() || !strings.Contains(args, job.ID.String()) {
		t.Errorf("queued %s %s, want the finetune job of %s", kind, args, job.ID)
	}
}

// A launch whose estimate exceeds what is left of the month's budget is
// refused with the figures; within the budget it goes through, and its
// estimate counts against the month until its actual cost is known.
func TestBudgetRefusesOverspending(t *testing.T) {
	srv := openaitest.New(t)
	e := newEnv(t, finetune.Providers{"openai": openaiEntry(srv)})
	ctx := context.Background()
	v := e.src.AddPref(e.org, "p v1", finetunetest.Pairs(6), 2)
	req := finetune.Request{VersionID: v.ID, Provider: "openai", BaseModel: mini, Method: provider.DPO} // $0.0054
	if err := e.svc.SetBudget(ctx, admin, e.org, pricing.Micros(8000)); err != nil {
		t.Fatal(err)
	}
	e.launch(t, req)
	_, _, err := e.svc.Launch(ctx, admin, e.org, req)
	var inv *errs.Invalid
	if !errors.As(err, &inv) || inv.ByField()["budget"] == "" {
		t.Fatalf("second launch: %v, want refused on budget", err)
	}
	msg := inv.ByField()["budget"]
	for _, figure := range []string{"$0.0054", "$0.0026 left", "$0.0080 budget", "$0.0054 spent"} {
		if !strings.Contains(msg, figure) {
			t.Errorf("refusal %q lacks %q", msg, figure)
		}
	}
	b, err := e.svc.Budget(ctx, e.org)
	if err != nil || b.Spent != 5400 || b.Left() != 2600 {
		t.Errorf("budget %+v (%v), want 5400 spent and 2600 left", b, err)
	}
	if err := e.svc.SetBudget(ctx, admin, e.org, -1); err == nil {
		t.Error("a negative budget was accepted")
	}
}

// The provider's failure ends the job with its message; the tokens it
// reports as trained are what is charged.
func TestProviderFailureKeepsItsMessage(t *testing.T) {
	srv := openaitest.New(t)
	sc := openaitest.DefaultScript()
	sc.FailAtStep, sc.FailMessage = 3, "Training diverged: loss became NaN."
	srv.SetScript(sc)
	e := newEnv(t, finetune.Providers{"openai": openaiEntry(srv)})
	v := e.src.AddPref(e.org, "p v1", finetunetest.Pairs(6), 2)
	job := e.launch(t, finetune.Request{VersionID: v.ID, Provider: "openai", BaseModel: mini, Method: provider.DPO})
	e.run(t, job.ID)
	j := e.job(t, job.ID).Job
	if j.Status != db.FinetuneStatusFailed || j.ErrorMessage != sc.FailMessage {
		t.Fatalf("job %s with error %q, want failed with %q", j.Status, j.ErrorMessage, sc.FailMessage)
	}
}

// A file OpenAI cannot process is permanent: the job fails with OpenAI's
// reason and no job is created.
func TestRefusedFileFailsTheJob(t *testing.T) {
	srv := openaitest.New(t)
	sc := openaitest.DefaultScript()
	sc.FileError = "Invalid file format: line 3 is not JSON."
	srv.SetScript(sc)
	e := newEnv(t, finetune.Providers{"openai": openaiEntry(srv)})
	v := e.src.AddPref(e.org, "p v1", finetunetest.Pairs(6), 2)
	job := e.launch(t, finetune.Request{VersionID: v.ID, Provider: "openai", BaseModel: mini, Method: provider.DPO})
	e.run(t, job.ID)
	j := e.job(t, job.ID).Job
	if j.Status != db.FinetuneStatusFailed || !strings.Contains(j.ErrorMessage, sc.FileError) || srv.JobsCreated() != 0 {
		t.Fatalf("job %s, error %q, %d provider jobs", j.Status, j.ErrorMessage, srv.JobsCreated())
	}
	if j.ActualCost.Int64 != 0 {
		t.Errorf("a refused job cost %d", j.ActualCost.Int64)
	}
}

// Server errors and rate limits are retried by the worker without
// creating anything twice.
func TestTransientErrorsAreRetried(t *testing.T) {
	srv := openaitest.New(t)
	e := newEnv(t, finetune.Providers{"openai": openaiEntry(srv)})
	for _, f := range []openaitest.Fault{
		{Method: "POST", Path: "/v1/files", Status: 500},
		{Method: "POST", Path: "/v1/fine_tuning/jobs", Status: 503},
		{Method: "GET", Path: "/v1/fine_tuning/jobs/", Status: 429, Times: 2},
	} {
		srv.Inject(f)
	}
	v := e.src.AddPref(e.org, "p v1", finetunetest.Pairs(6), 2)
	job := e.launch(t, finetune.Request{VersionID: v.ID, Provider: "openai", BaseModel: mini, Method: provider.DPO})
	_, errs := e.run(t, job.ID)
	if len(errs) != 4 {
		t.Errorf("%d failed attempts, want 4: %v", len(errs), errs)
	}
	j := e.job(t, job.ID).Job
	if j.Status != db.FinetuneStatusSucceeded || srv.FilesCreated() != 2 || srv.JobsCreated() != 1 {
		t.Fatalf("job %s; %d files, %d jobs", j.Status, srv.FilesCreated(), srv.JobsCreated())
	}
}

// Cancelling a running job stops it at the provider; cancelling an ended
// job is a conflict and charges nothing; a job cancelled before anything
// was sent costs nothing and never reaches the provider.
func TestCancel(t *testing.T) {
	ctx := context.Background()
	srv := openaitest.New(t)
	e := newEnv(t, finetune.Providers{"openai": openaiEntry(srv)})
	v := e.src.AddPref(e.org, "p v1", finetunetest.Pairs(6), 2)
	req := finetune.Request{VersionID: v.ID, Provider: "openai", BaseModel: mini, Method: provider.DPO}

	running := e.launch(t, req)
	for {
		out, err := e.svc.Advance(ctx, running.ID)
		if err != nil {
			t.Fatal(err)
		}
		if e.job(t, running.ID).Job.Status == db.FinetuneStatusRunning || out.Done {
			break
		}
	}
	if _, err := e.svc.Cancel(ctx, admin, e.org, running.ID); err != nil {
		t.Fatal(err)
	}
	steps, _ := e.run(t, running.ID)
	j := e.job(t, running.ID).Job
	if j.Status != db.FinetuneStatusCancelled || srv.Hits("POST", "/v1/fine_tuning/jobs/"+j.ProviderJobID+"/cancel") != 1 {
		t.Fatalf("job %s after steps %v; cancel sent %d times", j.Status, steps, srv.Hits("POST", "/v1/fine_tuning/jobs/"+j.ProviderJobID+"/cancel"))
	}
	var conflict *errs.Conflict
	if _, err := e.svc.Cancel(ctx, admin, e.org, running.ID); !errors.As(err, &conflict) {
		t.Errorf("cancelling a cancelled job: %v, want a conflict", err)
	}

	early := e.launch(t, req)
	if _, err := e.svc.Cancel(ctx, admin, e.org, early.ID); err != nil {
		t.Fatal(err)
	}
	e.run(t, early.ID)
	j = e.job(t, early.ID).Job
	if j.Status != db.FinetuneStatusCancelled || j.ActualCost.Int64 != 0 || srv.JobsCreated() != 1 {
		t.Errorf("early cancel: %s costing %d, %d provider jobs", j.Status, j.ActualCost.Int64, srv.JobsCreated())
	}
	if _, err := e.svc.Cancel(ctx, admin, uuid.New(), early.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("another organisation cancelled the job: %v", err)
	}
}

// Lists filter and page with a cursor, newest first.
func TestListPages(t *testing.T) {
	srv := openaitest.New(t)
	e := newEnv(t, finetune.Providers{"openai": openaiEntry(srv)})
	v := e.src.AddPref(e.org, "p v1", finetunetest.Pairs(6), 2)
	var ids []uuid.UUID
	for range 5 {
		ids = append(ids, e.launch(t, finetune.Request{VersionID: v.ID, Provider: "openai", BaseModel: mini, Method: provider.DPO}).ID)
	}
	var seen []uuid.UUID
	var cur *keyset.Cursor
	for {
		p, err := e.svc.List(context.Background(), e.org, finetune.Filter{Provider: "openai"}, cur, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range p.Jobs {
			seen = append(seen, j.ID)
		}
		if p.Next == nil {
			break
		}
		if cur, err = keyset.Parse(finetune.ListName, p.Next.Encode(finetune.ListName)); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(seen) != fmt.Sprint([]uuid.UUID{ids[4], ids[3], ids[2], ids[1], ids[0]}) {
		t.Errorf("pages gave %v, want newest first %v", seen, ids)
	}
	p, err := e.svc.List(context.Background(), e.org, finetune.Filter{Status: "succeeded"}, nil, 10)
	if err != nil || len(p.Jobs) != 0 {
		t.Errorf("succeeded filter: %d jobs (%v)", len(p.Jobs), err)
	}
}

// Two launches at once that each fit the budget but not together: the
// budget row's lock lets exactly one through.
func TestConcurrentLaunchesShareTheBudget(t *testing.T) {
	srv := openaitest.New(t)
	e := newEnv(t, finetune.Providers{"openai": openaiEntry(srv)})
	ctx := context.Background()
	v := e.src.AddPref(e.org, "p v1", finetunetest.Pairs(6), 2)
	req := finetune.Request{VersionID: v.ID, Provider: "openai", BaseModel: mini, Method: provider.DPO} // $0.0054 each
	if err := e.svc.SetBudget(ctx, admin, e.org, pricing.Micros(10000)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Estimate(ctx, e.org, req); err != nil { // count once, so both race on the budget alone
		t.Fatal(err)
	}
	results := make(chan error, 2)
	for range 2 {
		go func() {
			_, _, err := e.svc.Launch(ctx, admin, e.org, req)
			results <- err
		}()
	}
	var ok, refused int
	for range 2 {
		var inv *errs.Invalid
		switch err := <-results; {
		case err == nil:
			ok++
		case errors.As(err, &inv) && inv.ByField()["budget"] != "":
			refused++
		default:
			t.Fatal(err)
		}
	}
	if ok != 1 || refused != 1 {
		t.Errorf("%d launched and %d refused, want one of each", ok, refused)
	}
}

// The estimate follows OpenAI's billing rule: the training file's tokens
// times the epochs, for supervised and DPO alike; the validation split is
// not billed. Counted by hand with o200k_base, where every text here is
// one token: a chat is 3 (reply priming) + 2 messages × (3 framing + 1
// role + 1 content) = 13 tokens; a DPO pair holds its prompt once and both
// replies, 3 + 3 × 5 = 18.
func TestEstimateFollowsTheBillingRule(t *testing.T) {
	e := newEnv(t, finetune.Providers{"openai": openaiEntry(openaitest.New(t))})
	sft := e.src.AddSFT(e.org, "chats v1", finetunetest.Chats(12), 2)
	noValid := e.src.AddSFT(e.org, "chats v2", finetunetest.Chats(10), 0)
	dpo := e.src.AddPref(e.org, "pairs v1", finetunetest.Pairs(6), 2)
	for _, tc := range []struct {
		name     string
		version  uuid.UUID
		method   provider.Method
		epochs   provider.Value
		perEpoch int64
		epochsN  int
	}{
		{"supervised, 3 epochs", sft.ID, provider.Supervised, provider.Num(3), 10 * 13, 3},
		{"supervised, validation not billed", noValid.ID, provider.Supervised, provider.Num(3), 10 * 13, 3},
		// auto: 10 examples are run 100 / 10 = 10 times.
		{"supervised, auto epochs", sft.ID, provider.Supervised, provider.Auto(), 10 * 13, 10},
		{"dpo, 2 epochs", dpo.ID, provider.DPO, provider.Num(2), 4 * 18, 2},
		// auto: 4 pairs are run 100 / 4 = 25 times.
		{"dpo, auto epochs", dpo.ID, provider.DPO, provider.Auto(), 4 * 18, 25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			est, err := e.svc.Estimate(t.Context(), e.org, finetune.Request{VersionID: tc.version, Provider: "openai", BaseModel: mini,
				Method: tc.method, Hyper: provider.Hyperparameters{Epochs: tc.epochs}})
			if err != nil {
				t.Fatal(err)
			}
			want := tc.perEpoch * int64(tc.epochsN)
			if est.TokensPerEpoch != tc.perEpoch || est.Epochs != tc.epochsN || est.TrainedTokens != want || est.Cost != pricing.Micros(want*3) {
				t.Errorf("estimate %d tokens/epoch × %d = %d costing %s; want %d × %d = %d costing %s",
					est.TokensPerEpoch, est.Epochs, est.TrainedTokens, est.Cost, tc.perEpoch, tc.epochsN, want, pricing.Micros(want*3))
			}
		})
	}
}

package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/openai"
	"github.com/curate/curate/internal/provider/openaitest"
	"github.com/curate/curate/internal/publicdata"
	"github.com/curate/curate/internal/tokens"
)

// trainChat is a small chat fine-tuning file written for these tests.
var trainChat = filepath.Join("testdata", "train.jsonl")

const jobID = "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b"

func newProvider(t *testing.T, srv *openaitest.Server) *openai.Provider {
	t.Helper()
	p, err := openai.New(openai.Config{APIKey: "sk-test", BaseURL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func validFile(t *testing.T) string {
	return writeFile(t, "valid.jsonl", `{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello."}]}`+"\n")
}

func upload(t *testing.T, p *openai.Provider, validPath string) provider.UploadResult {
	t.Helper()
	res, err := p.Upload(context.Background(), provider.UploadRequest{
		CurateJobID: jobID, TrainPath: trainChat, ValidPath: validPath, Format: "openai_chat",
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// uploaded is the content OpenAI holds for a file.
func uploaded(t *testing.T, srv *openaitest.Server, fileID string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL()+"files/"+fileID+"/content", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer sk-test")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("file %s content: %d %s %v", fileID, res.StatusCode, b, err)
	}
	return b
}

// OpenAI's own toy file (public data, its 8,000-token example included)
// reaches OpenAI byte for byte.
func TestUploadCookbookFile(t *testing.T) {
	path := publicdata.Path(t, "openai-cookbook", "toy_chat_fine_tuning.jsonl")
	srv := openaitest.New(t)
	p := newProvider(t, srv)
	res, err := p.Upload(context.Background(), provider.UploadRequest{CurateJobID: jobID, TrainPath: path, Format: "openai_chat"})
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := uploaded(t, srv, res.TrainFileID); !bytes.Equal(got, want) {
		t.Fatalf("uploaded %d bytes, the file has %d", len(got), len(want))
	}
}

func supervised(files provider.UploadResult) provider.CreateRequest {
	seed := int64(42)
	return provider.CreateRequest{
		CurateJobID: jobID, BaseModel: "gpt-4o-mini-2024-07-18", Method: provider.Supervised,
		Hyper:  provider.Hyperparameters{Epochs: provider.Num(2)},
		Suffix: "curate-test", Seed: &seed,
		TrainFileID: files.TrainFileID, ValidFileID: files.ValidFileID,
	}
}

func TestEndToEnd(t *testing.T) {
	ctx := context.Background()
	srv := openaitest.New(t)
	p := newProvider(t, srv)

	files := upload(t, p, validFile(t))
	if files.TrainFileID == "" || files.ValidFileID == "" || files.TrainFileID == files.ValidFileID {
		t.Fatalf("upload gave %+v", files)
	}
	if got := srv.FilesCreated(); got != 2 {
		t.Fatalf("files created = %d, want 2", got)
	}
	if want, err := os.ReadFile(trainChat); err != nil || !bytes.Equal(uploaded(t, srv, files.TrainFileID), want) {
		t.Fatalf("the training file did not arrive as written (%v)", err)
	}
	// The default script keeps a new file "uploaded" for one fetch.
	for i, want := range []bool{false, true} {
		ready, err := p.WaitUploaded(ctx, files)
		if err != nil || ready != want {
			t.Fatalf("WaitUploaded #%d = %v, %v; want %v", i+1, ready, err, want)
		}
	}

	if _, found, err := p.FindJob(ctx, jobID); err != nil || found {
		t.Fatalf("FindJob before create = found %v, err %v", found, err)
	}
	job, err := p.Create(ctx, supervised(files))
	if err != nil {
		t.Fatal(err)
	}
	if job.CurateJobID != jobID || job.Status.State != provider.StateValidating || job.BaseModel != "gpt-4o-mini-2024-07-18" {
		t.Fatalf("created job = %+v", job)
	}

	var sent struct {
		Metadata map[string]string `json:"metadata"`
		Suffix   string            `json:"suffix"`
		Seed     int64             `json:"seed"`
		Method   struct {
			Type       string `json:"type"`
			Supervised struct {
				Hyperparameters map[string]any `json:"hyperparameters"`
			} `json:"supervised"`
		} `json:"method"`
		ValidationFile string `json:"validation_file"`
	}
	if err := json.Unmarshal(srv.JobRequest(job.ID), &sent); err != nil {
		t.Fatal(err)
	}
	if sent.Metadata["curate_job_id"] != jobID || sent.Suffix != "curate-test" || sent.Seed != 42 ||
		sent.Method.Type != "supervised" || sent.ValidationFile != files.ValidFileID {
		t.Fatalf("create request = %+v", sent)
	}
	// Only the epoch count was set; auto settings are left out.
	if hp := sent.Method.Supervised.Hyperparameters; len(hp) != 1 || hp["n_epochs"] != 2.0 {
		t.Fatalf("hyperparameters sent = %v", hp)
	}

	// Default script: one fetch validating, one queued, then one step per
	// fetch of four; the fetch that shows step 4 ends the job.
	wantStates := []provider.State{
		provider.StateValidating, provider.StateQueued, provider.StateRunning,
		provider.StateRunning, provider.StateRunning, provider.StateSucceeded,
	}
	wantSteps := []int{0, 0, 1, 2, 3, 4}
	// Two epochs over four steps: steps 1-2 are epoch 1, steps 3-4 epoch 2.
	wantEpochs := []int{0, 0, 1, 1, 2, 2}
	var cursor provider.EventCursor
	var events []provider.Event
	var last provider.PollResult
	for i, want := range wantStates {
		res, err := p.Poll(ctx, job.ID, cursor)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status.State != want || res.Status.Progress.Step != wantSteps[i] || res.Status.Progress.Epoch != wantEpochs[i] {
			t.Fatalf("poll %d: state %s step %d epoch %d; want %s step %d epoch %d",
				i+1, res.Status.State, res.Status.Progress.Step, res.Status.Progress.Epoch, want, wantSteps[i], wantEpochs[i])
		}
		events = append(events, res.Events...)
		cursor, last = res.Cursor, res
	}

	// created, validating, queued->validated, started, 4 steps, model created, completed
	if len(events) != 10 {
		t.Fatalf("got %d events, want 10: %+v", len(events), events)
	}
	seen := map[string]bool{}
	var metricSteps []int
	for _, e := range events {
		if seen[e.ID] {
			t.Fatalf("event %s delivered twice", e.ID)
		}
		seen[e.ID] = true
		if e.Metric != nil {
			metricSteps = append(metricSteps, e.Metric.Step)
		}
	}
	if !equalInts(metricSteps, []int{1, 2, 3, 4}) {
		t.Fatalf("metrics events for steps %v, want 1..4 in order", metricSteps)
	}
	if events[0].Message != "Created fine-tuning job: "+job.ID || events[9].Message != "The job has successfully completed" {
		t.Fatalf("events out of order: first %q, last %q", events[0].Message, events[9].Message)
	}

	st := last.Status
	if st.FineTunedModel != "ft:gpt-4o-mini-2024-07-18:curate-fake:curate-test:"+job.ID || st.Progress.TotalSteps != 4 {
		t.Fatalf("final status = %+v", st)
	}
	// Billed as OpenAI bills: the training file's tokens, as the estimate
	// counts them, times the 2 epochs asked for; the validation file is free.
	counter, err := tokens.New(tokens.O200K)
	if err != nil {
		t.Fatal(err)
	}
	_, perEpoch, err := finetune.CountFile(ctx, counter, export.OpenAIChat, trainChat)
	if err != nil {
		t.Fatal(err)
	}
	if perEpoch == 0 || st.TrainedTokens != 2*perEpoch {
		t.Fatalf("trained %d tokens, want 2 epochs × %d", st.TrainedTokens, perEpoch)
	}
	// A checkpoint at the end of epoch 1 (step 2); the last epoch is the model itself.
	if len(last.Checkpoints) != 1 || last.Checkpoints[0].Step != 2 || *last.Checkpoints[0].Metrics.TrainLoss != 1.25 {
		t.Fatalf("checkpoints = %+v", last.Checkpoints)
	}

	got, err := p.Metrics(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	assertMetrics(t, got, openaitest.DefaultScript().Metrics)

	// Polling after the end brings nothing new.
	res, err := p.Poll(ctx, job.ID, cursor)
	if err != nil || len(res.Events) != 0 || res.Cursor != cursor {
		t.Fatalf("poll after end: %d events, cursor %q, err %v", len(res.Events), res.Cursor, err)
	}
}

func TestMetricsBeforeResult(t *testing.T) {
	ctx := context.Background()
	srv := openaitest.New(t)
	p := newProvider(t, srv)
	job, err := p.Create(ctx, supervised(upload(t, p, "")))
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Metrics(ctx, job.ID)
	if err != nil || len(got) != 0 {
		t.Fatalf("metrics before the job ended = %v, %v; want none", got, err)
	}
}

func TestDPORequest(t *testing.T) {
	ctx := context.Background()
	srv := openaitest.New(t)
	p := newProvider(t, srv)
	files := upload(t, p, "")
	req := supervised(files)
	req.BaseModel, req.Method = "gpt-4.1-mini-2025-04-14", provider.DPO
	req.Hyper = provider.Hyperparameters{Epochs: provider.Num(3), Beta: provider.Num(0.1), LearningRateMultiplier: provider.Num(0.5)}
	job, err := p.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var sent struct {
		Method struct {
			Type string `json:"type"`
			Dpo  struct {
				Hyperparameters map[string]any `json:"hyperparameters"`
			} `json:"dpo"`
		} `json:"method"`
	}
	if err := json.Unmarshal(srv.JobRequest(job.ID), &sent); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"n_epochs": 3.0, "beta": 0.1, "learning_rate_multiplier": 0.5}
	hp := sent.Method.Dpo.Hyperparameters
	if sent.Method.Type != "dpo" || len(hp) != len(want) {
		t.Fatalf("method sent = %+v", sent.Method)
	}
	for k, v := range want {
		if hp[k] != v {
			t.Errorf("%s = %v, want %v", k, hp[k], v)
		}
	}
}

func TestFailedJob(t *testing.T) {
	ctx := context.Background()
	srv := openaitest.New(t)
	sc := openaitest.DefaultScript()
	sc.FailAtStep, sc.FailMessage = 2, "Training data contained too few examples."
	srv.SetScript(sc)
	p := newProvider(t, srv)
	job, err := p.Create(ctx, supervised(upload(t, p, "")))
	if err != nil {
		t.Fatal(err)
	}
	var res provider.PollResult
	for range 4 { // validating, queued, step 1, step 2 fails
		if res, err = p.Poll(ctx, job.ID, res.Cursor); err != nil {
			t.Fatal(err)
		}
	}
	if res.Status.State != provider.StateFailed || res.Status.Error != "Training data contained too few examples." {
		t.Fatalf("status = %+v", res.Status)
	}
	last := res.Events[len(res.Events)-1]
	if last.Level != "error" || last.Message != sc.FailMessage {
		t.Fatalf("last event = %+v", last)
	}
}

func TestCancel(t *testing.T) {
	ctx := context.Background()
	srv := openaitest.New(t)
	p := newProvider(t, srv)
	job, err := p.Create(ctx, supervised(upload(t, p, "")))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := p.Poll(ctx, job.ID, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Cancel(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	for range 2 { // stays cancelled however often it is polled
		res, err := p.Poll(ctx, job.ID, "")
		if err != nil || res.Status.State != provider.StateCancelled {
			t.Fatalf("after cancel: %+v, %v", res.Status, err)
		}
	}
	err = p.Cancel(ctx, job.ID)
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.StatusCode != 400 || !pe.Permanent || !strings.Contains(pe.Message, "has already cancelled") {
		t.Fatalf("second cancel = %v", err)
	}
}

// A worker that crashed after each paid call, before storing its answer,
// runs again from the start with a new client: it must adopt what exists.
func TestResumeAfterCrash(t *testing.T) {
	ctx := context.Background()
	srv := openaitest.New(t)
	valid := validFile(t)

	first := newProvider(t, srv)
	files := upload(t, first, valid)
	job, err := first.Create(ctx, supervised(files))
	if err != nil {
		t.Fatal(err)
	}

	again := newProvider(t, srv)
	files2 := upload(t, again, valid)
	if files2 != files {
		t.Fatalf("second upload = %+v, want the first %+v", files2, files)
	}
	found, ok, err := again.FindJob(ctx, jobID)
	if err != nil || !ok || found.ID != job.ID || found.CurateJobID != jobID {
		t.Fatalf("FindJob = %+v, %v, %v; want %s", found, ok, err, job.ID)
	}
	// Even without FindJob, creating again returns the same job.
	job2, err := again.Create(ctx, supervised(files2))
	if err != nil || job2.ID != job.ID {
		t.Fatalf("second create = %s, %v; want %s", job2.ID, err, job.ID)
	}
	if f, j := srv.FilesCreated(), srv.JobsCreated(); f != 2 || j != 1 {
		t.Fatalf("created %d files and %d jobs, want 2 and 1", f, j)
	}

	// Another Curate job is not confused with this one.
	if _, ok, err := again.FindJob(ctx, "0a1b2c3d"); err != nil || ok {
		t.Fatalf("FindJob for another id = %v, %v", ok, err)
	}
}

// Upload must not send a file it could not first look for: a second copy
// is what the lookup exists to prevent.
func TestUploadStopsWhenLookupFails(t *testing.T) {
	ctx := context.Background()
	srv := openaitest.New(t)
	p := newProvider(t, srv)
	srv.Inject(openaitest.Fault{Method: "GET", Path: "/v1/files", Status: 500, RetryAfter: time.Millisecond, Times: 3})
	_, err := p.Upload(ctx, provider.UploadRequest{CurateJobID: jobID, TrainPath: trainChat, Format: "openai_chat"})
	if err == nil || provider.IsPermanent(err) {
		t.Fatalf("upload with the file list failing = %v, want a temporary error", err)
	}
	if srv.FilesCreated() != 0 {
		t.Fatal("a file was created although the lookup failed")
	}
}

func TestWaitUploadedRefusedFile(t *testing.T) {
	ctx := context.Background()
	srv := openaitest.New(t)
	sc := openaitest.DefaultScript()
	sc.FileProcessingPolls, sc.FileError = 0, "Invalid file format. Line 3, key \"messages\": missing"
	srv.SetScript(sc)
	p := newProvider(t, srv)
	files := upload(t, p, "")
	ready, err := p.WaitUploaded(ctx, files)
	if ready || !provider.IsPermanent(err) || !strings.Contains(err.Error(), `Line 3, key "messages"`) {
		t.Fatalf("WaitUploaded = %v, %v", ready, err)
	}
}

func TestUploadChecksRequest(t *testing.T) {
	srv := openaitest.New(t)
	p := newProvider(t, srv)
	empty := writeFile(t, "empty.jsonl", "")
	tests := []struct {
		name   string
		req    provider.UploadRequest
		fields []string
	}{
		{"bedrock format", provider.UploadRequest{CurateJobID: jobID, TrainPath: trainChat, Format: "bedrock_chat"}, []string{"format"}},
		{"no train file", provider.UploadRequest{CurateJobID: jobID, Format: "openai_chat"}, []string{"train_path"}},
		{"missing file", provider.UploadRequest{CurateJobID: jobID, TrainPath: "no/such.jsonl", Format: "openai_chat"}, []string{"train_path"}},
		{"empty validation file", provider.UploadRequest{CurateJobID: jobID, TrainPath: trainChat, ValidPath: empty, Format: "openai_chat"}, []string{"valid_path"}},
		{"bad job id", provider.UploadRequest{CurateJobID: "a/b", TrainPath: trainChat, Format: "openai_chat"}, []string{"curate_job_id"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.Upload(context.Background(), tt.req)
			assertFields(t, err, tt.fields...)
		})
	}
	if srv.FilesCreated() != 0 {
		t.Fatal("a refused upload created a file")
	}
}

func TestValidate(t *testing.T) {
	p, err := openai.New(openai.Config{APIKey: "sk-test"})
	if err != nil {
		t.Fatal(err)
	}
	num := provider.Num
	tests := []struct {
		name   string
		method provider.Method
		model  string
		h      provider.Hyperparameters
		fields []string // refused fields, in order; none means valid
	}{
		{"all auto", provider.Supervised, "gpt-4o-mini-2024-07-18", provider.Hyperparameters{}, nil},
		{"range ends", provider.Supervised, "gpt-4.1-2025-04-14", provider.Hyperparameters{Epochs: num(50), BatchSize: num(256), LearningRateMultiplier: num(0.01)}, nil},
		{"lowest ends", provider.Supervised, "babbage-002", provider.Hyperparameters{Epochs: num(1), BatchSize: num(1)}, nil},
		{"dpo beta 2", provider.DPO, "gpt-4.1-nano-2025-04-14", provider.Hyperparameters{Beta: num(2)}, nil},
		{"dpo on a fine-tuned model", provider.DPO, "ft:gpt-4o-mini-2024-07-18:acme:support:abc123", provider.Hyperparameters{}, nil},
		{"epochs 0", provider.Supervised, "gpt-4o-mini-2024-07-18", provider.Hyperparameters{Epochs: num(0)}, []string{provider.FieldEpochs}},
		{"epochs 51", provider.Supervised, "gpt-4o-mini-2024-07-18", provider.Hyperparameters{Epochs: num(51)}, []string{provider.FieldEpochs}},
		{"epochs 2.5", provider.Supervised, "gpt-4o-mini-2024-07-18", provider.Hyperparameters{Epochs: num(2.5)}, []string{provider.FieldEpochs}},
		{"batch 257", provider.Supervised, "gpt-4o-mini-2024-07-18", provider.Hyperparameters{BatchSize: num(257)}, []string{provider.FieldBatchSize}},
		{"lr 0", provider.Supervised, "gpt-4o-mini-2024-07-18", provider.Hyperparameters{LearningRateMultiplier: num(0)}, []string{provider.FieldLearningRateMultiplier}},
		{"beta 0", provider.DPO, "gpt-4o-2024-08-06", provider.Hyperparameters{Beta: num(0)}, []string{provider.FieldBeta}},
		{"beta 2.5", provider.DPO, "gpt-4o-2024-08-06", provider.Hyperparameters{Beta: num(2.5)}, []string{provider.FieldBeta}},
		{"beta without dpo", provider.Supervised, "gpt-4o-2024-08-06", provider.Hyperparameters{Beta: num(0.1)}, []string{provider.FieldBeta}},
		{"early stopping", provider.Supervised, "gpt-4o-2024-08-06", provider.Hyperparameters{EarlyStoppingPatience: num(2)}, []string{provider.FieldEarlyStoppingPatience}},
		{"dpo on gpt-3.5", provider.DPO, "gpt-3.5-turbo-0125", provider.Hyperparameters{}, []string{"method"}},
		{"dpo on a fine-tuned gpt-3.5", provider.DPO, "ft:gpt-3.5-turbo-0125:acme::x1", provider.Hyperparameters{}, []string{"method"}},
		{"unknown model", provider.Supervised, "gpt-5", provider.Hyperparameters{}, []string{"base_model"}},
		{"no model", provider.Supervised, "", provider.Hyperparameters{}, []string{"base_model"}},
		{"unknown method", "reinforcement", "gpt-4o-2024-08-06", provider.Hyperparameters{}, []string{"method"}},
		{"several", provider.DPO, "gpt-4o-2024-08-06", provider.Hyperparameters{Epochs: num(0), BatchSize: num(0.5), Beta: num(3)},
			[]string{provider.FieldEpochs, provider.FieldBatchSize, provider.FieldBeta}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertFields(t, p.Validate(tt.method, tt.model, tt.h), tt.fields...)
		})
	}
}

func TestValidateMessages(t *testing.T) {
	p, err := openai.New(openai.Config{APIKey: "sk-test"})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Validate(provider.DPO, "gpt-3.5-turbo-0125", provider.Hyperparameters{Epochs: provider.Num(60), Beta: provider.Num(0)})
	want := "invalid request: method: gpt-3.5-turbo-0125 does not take dpo training; models that do: " +
		"gpt-4.1-2025-04-14, gpt-4.1-mini-2025-04-14, gpt-4.1-nano-2025-04-14, gpt-4o-2024-08-06, gpt-4o-mini-2024-07-18; " +
		"hyperparameters.epochs: must be a whole number from 1 to 50, or auto; " +
		"hyperparameters.beta: must be a number greater than 0 and at most 2, or auto"
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}

func TestCreateRefusesBeforeCalling(t *testing.T) {
	srv := openaitest.New(t)
	p := newProvider(t, srv)
	seed := int64(-1)
	req := provider.CreateRequest{
		CurateJobID: jobID, BaseModel: "gpt-4o-mini-2024-07-18", Method: provider.Supervised,
		Suffix: strings.Repeat("s", 65), Seed: &seed,
	}
	_, err := p.Create(context.Background(), req)
	assertFields(t, err, "train_file_id", "suffix", "seed")
	if n := srv.Hits("POST", "/v1/fine_tuning/jobs"); n != 0 {
		t.Fatalf("refused request still reached the API %d times", n)
	}
}

func TestMissingCredentials(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	_, err := openai.New(openai.Config{})
	if err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Fatalf("New without a key = %v", err)
	}
}

func TestEnvironmentAndOverride(t *testing.T) {
	ctx := context.Background()
	srv := openaitest.New(t)
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	t.Setenv("OPENAI_BASE_URL", srv.URL())

	srv.RequireAPIKey("sk-from-env")
	p, err := openai.New(openai.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.FindJob(ctx, jobID); err != nil {
		t.Fatalf("with the key and URL from the environment: %v", err)
	}

	srv.RequireAPIKey("sk-configured")
	p, err = openai.New(openai.Config{APIKey: "sk-configured"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.FindJob(ctx, jobID); err != nil {
		t.Fatalf("a configured key should override the environment: %v", err)
	}

	srv.RequireAPIKey("sk-other")
	_, _, err = p.FindJob(ctx, jobID)
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.StatusCode != 401 || !pe.Permanent {
		t.Fatalf("wrong key = %v", err)
	}
}

func TestServerErrorRetried(t *testing.T) {
	ctx := context.Background()
	srv := openaitest.New(t)
	p := newProvider(t, srv)
	files := upload(t, p, "")
	srv.Inject(openaitest.Fault{Method: "POST", Path: "/v1/fine_tuning/jobs", Status: 500})
	job, err := p.Create(ctx, supervised(files))
	if err != nil {
		t.Fatalf("create after one 500: %v", err)
	}
	if h, j := srv.Hits("POST", "/v1/fine_tuning/jobs"), srv.JobsCreated(); h != 2 || j != 1 {
		t.Fatalf("%d create requests and %d jobs, want 2 and 1", h, j)
	}

	srv.Inject(openaitest.Fault{Method: "GET", Path: "/v1/fine_tuning/jobs/" + job.ID, Status: 429, RetryAfter: time.Millisecond, Times: 2})
	if _, err := p.Poll(ctx, job.ID, ""); err != nil {
		t.Fatalf("poll after two 429s: %v", err)
	}
}

func TestServerErrorsExhaustRetries(t *testing.T) {
	srv := openaitest.New(t)
	p, err := openai.New(openai.Config{APIKey: "sk-test", BaseURL: srv.URL(), MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv.Inject(openaitest.Fault{Path: "/v1/fine_tuning/jobs", Status: 503, RetryAfter: time.Millisecond, Times: 2})
	_, _, err = p.FindJob(context.Background(), jobID)
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.StatusCode != 503 || pe.Permanent || provider.IsPermanent(err) {
		t.Fatalf("after retries ran out = %v", err)
	}
	if n := srv.Hits("GET", "/v1/fine_tuning/jobs"); n != 2 {
		t.Fatalf("%d requests, want 2 (one retry)", n)
	}
}

func TestBadRequestSurfaced(t *testing.T) {
	srv := openaitest.New(t)
	p := newProvider(t, srv)
	req := supervised(provider.UploadResult{TrainFileID: "file-nope"})
	_, err := p.Create(context.Background(), req)
	var pe *provider.Error
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want *provider.Error", err)
	}
	if pe.StatusCode != 400 || !pe.Permanent || pe.Message != "invalid training_file: file-nope (param training_file)" {
		t.Fatalf("error = %+v", pe)
	}
	if want := "openai: create job: 400 invalid_training_file: invalid training_file: file-nope (param training_file)"; err.Error() != want {
		t.Fatalf("message = %q, want %q", err.Error(), want)
	}
	if n := srv.Hits("POST", "/v1/fine_tuning/jobs"); n != 1 {
		t.Fatalf("a 400 was retried: %d requests", n)
	}
}

func TestTimeout(t *testing.T) {
	srv := openaitest.New(t)
	p, err := openai.New(openai.Config{APIKey: "sk-test", BaseURL: srv.URL(), RequestTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv.Inject(openaitest.Fault{Path: "/v1/fine_tuning/jobs/ftjob-x", Delay: 10 * time.Second})
	start := time.Now()
	_, err = p.Poll(context.Background(), "ftjob-x", "")
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || provider.IsPermanent(err) {
		t.Fatalf("poll of a stalled server = %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("gave up after %v", took)
	}
}

func assertFields(t *testing.T, err error, fields ...string) {
	t.Helper()
	if len(fields) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	var ve *provider.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want a validation error on %v", err, fields)
	}
	var got []string
	for _, fe := range ve.Errors {
		got = append(got, fe.Field)
	}
	if strings.Join(got, ",") != strings.Join(fields, ",") {
		t.Fatalf("refused fields %v, want %v (%v)", got, fields, err)
	}
}

func assertMetrics(t *testing.T, got, want []provider.StepMetric) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d metric rows, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Step != w.Step || !sameOpt(g.TrainLoss, w.TrainLoss) || !sameOpt(g.TrainAccuracy, w.TrainAccuracy) ||
			!sameOpt(g.ValidLoss, w.ValidLoss) || !sameOpt(g.ValidMeanTokenAccuracy, w.ValidMeanTokenAccuracy) {
			t.Fatalf("row %d = %s, want %s", i, show(g), show(w))
		}
	}
}

func sameOpt(a, b *float64) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

func show(m provider.StepMetric) string {
	b, _ := json.Marshal(m)
	return string(b)
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

package bedrock_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/bedrock"
	"github.com/curate/curate/internal/provider/bedrocktest"
)

const (
	jobID  = "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b"
	haiku  = "anthropic.claude-3-haiku-20240307-v1:0:200k"
	role   = "arn:aws:iam::123456789012:role/curate-bedrock"
	prefix = "curate/ft"
)

// awsConfig has static credentials and retries without waiting, so tests
// of retried failures stay fast.
func awsConfig() *aws.Config {
	return &aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDCURATETEST", "secret", ""),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
			})
		},
	}
}

func config(srv *bedrocktest.Server, awsCfg *aws.Config) bedrock.Config {
	return bedrock.Config{
		Bucket: bedrocktest.Bucket, Prefix: prefix, RoleARN: role,
		BedrockEndpoint: srv.BedrockURL(), S3Endpoint: srv.S3URL(), S3PathStyle: true, AWS: awsCfg,
	}
}

func newProvider(t *testing.T, srv *bedrocktest.Server) *bedrock.Provider {
	t.Helper()
	p, err := bedrock.New(context.Background(), config(srv, awsConfig()))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Two examples in the bedrock_chat shape Claude 3 Haiku trains on.
const trainData = `{"system":"You are a support assistant.","messages":[{"role":"user","content":"How do I check deployment status?"},{"role":"assistant","content":"Open Deployments, then Status."}]}
{"system":"You are a support assistant.","messages":[{"role":"user","content":"Where are the logs?"},{"role":"assistant","content":"Under Observability, then Logs."}]}
`

const validData = `{"system":"You are a support assistant.","messages":[{"role":"user","content":"How do I roll back?"},{"role":"assistant","content":"Open the release and choose Roll back."}]}
`

func dataFiles(t *testing.T) (train, valid string) {
	t.Helper()
	dir := t.TempDir()
	train, valid = filepath.Join(dir, "train.jsonl"), filepath.Join(dir, "valid.jsonl")
	for path, content := range map[string]string{train: trainData, valid: validData} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return train, valid
}

func upload(t *testing.T, p *bedrock.Provider, train, valid string) provider.UploadResult {
	t.Helper()
	res, err := p.Upload(context.Background(), provider.UploadRequest{CurateJobID: jobID, TrainPath: train, ValidPath: valid, Format: "bedrock_chat"})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func request(files provider.UploadResult) provider.CreateRequest {
	return provider.CreateRequest{
		CurateJobID: jobID, BaseModel: haiku, Method: provider.Supervised, Suffix: "support",
		Hyper: provider.Hyperparameters{
			Epochs: provider.Num(2), BatchSize: provider.Num(8), LearningRateMultiplier: provider.Num(1),
			EarlyStoppingThreshold: provider.Num(0.01), EarlyStoppingPatience: provider.Num(3),
		},
		TrainFileID: files.TrainFileID, ValidFileID: files.ValidFileID,
	}
}

func TestEndToEnd(t *testing.T) {
	ctx := context.Background()
	srv := bedrocktest.New(t)
	p := newProvider(t, srv)
	train, valid := dataFiles(t)

	files := upload(t, p, train, valid)
	want := provider.UploadResult{
		TrainFileID: "s3://curate-training/curate/ft/" + jobID + "/train.jsonl",
		ValidFileID: "s3://curate-training/curate/ft/" + jobID + "/validation.jsonl",
	}
	if files != want {
		t.Fatalf("upload = %+v, want %+v", files, want)
	}
	if got, ok := srv.Object(bedrocktest.Bucket, "curate/ft/"+jobID+"/train.jsonl"); !ok || string(got) != trainData {
		t.Fatalf("stored training file = %q", got)
	}
	if srv.ObjectsCreated() != 2 {
		t.Fatalf("objects created = %d, want 2", srv.ObjectsCreated())
	}
	if ready, err := p.WaitUploaded(ctx, files); err != nil || !ready {
		t.Fatalf("WaitUploaded = %v, %v", ready, err)
	}

	if _, found, err := p.FindJob(ctx, jobID); err != nil || found {
		t.Fatalf("FindJob before create = %v, %v", found, err)
	}
	job, err := p.Create(ctx, request(files))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(job.ID, "arn:aws:bedrock:us-east-1:123456789012:model-customization-job/"+haiku+"/") ||
		job.Status.State != provider.StateValidating || job.CurateJobID != jobID {
		t.Fatalf("created job = %+v", job)
	}

	var sent struct {
		JobName, ClientRequestToken, CustomModelName, RoleArn, BaseModelIdentifier, CustomizationType string
		HyperParameters                                                                               map[string]string
		OutputDataConfig                                                                              struct{ S3Uri string }
		ValidationDataConfig                                                                          struct{ Validators []struct{ S3Uri string } }
	}
	if err := json.Unmarshal(srv.JobRequest(job.ID), &sent); err != nil {
		t.Fatal(err)
	}
	wantHyper := map[string]string{
		"epochCount": "2", "batchSize": "8", "learningRateMultiplier": "1",
		"earlyStoppingThreshold": "0.01", "earlyStoppingPatience": "3",
	}
	if sent.JobName != "curate-"+jobID || sent.ClientRequestToken != "curate-"+jobID || sent.CustomModelName != "support-"+jobID ||
		sent.RoleArn != role || sent.BaseModelIdentifier != haiku || sent.CustomizationType != "FINE_TUNING" ||
		sent.OutputDataConfig.S3Uri != "s3://curate-training/curate/ft/"+jobID+"/output/" ||
		len(sent.ValidationDataConfig.Validators) != 1 || sent.ValidationDataConfig.Validators[0].S3Uri != files.ValidFileID {
		t.Fatalf("create request = %+v", sent)
	}
	if len(sent.HyperParameters) != len(wantHyper) {
		t.Fatalf("hyperParameters = %v, want %v", sent.HyperParameters, wantHyper)
	}
	for k, v := range wantHyper {
		if sent.HyperParameters[k] != v {
			t.Errorf("hyperParameters[%s] = %q, want %q", k, sent.HyperParameters[k], v)
		}
	}

	// Default script: one fetch checking data, two training, then done.
	for i, wantState := range []provider.State{provider.StateValidating, provider.StateRunning} {
		res, err := p.Poll(ctx, job.ID, "")
		if err != nil || res.Status.State != wantState || res.Status.ProviderState != "InProgress" || res.Status.Progress.TotalEpochs != 2 {
			t.Fatalf("poll %d = %+v, %v; want %s", i+1, res.Status, err, wantState)
		}
	}
	// Metrics reads the job too, which is its third fetch: the second
	// training fetch, when all four training steps are written.
	got, err := p.Metrics(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	assertMetrics(t, got, []provider.StepMetric{
		{Step: 0, Epoch: 1, TrainLoss: ptr(2.5)},
		{Step: 1, Epoch: 1, TrainLoss: ptr(1.75)},
		{Step: 2, Epoch: 2, TrainLoss: ptr(1.25)},
		{Step: 3, Epoch: 2, TrainLoss: ptr(1)},
	})

	res, err := p.Poll(ctx, job.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	jobNumber := job.ID[strings.LastIndex(job.ID, "/")+1:]
	if res.Status.State != provider.StateSucceeded ||
		res.Status.FineTunedModel != "arn:aws:bedrock:us-east-1:123456789012:custom-model/"+haiku+"/"+jobNumber {
		t.Fatalf("final status = %+v", res.Status)
	}
	if len(res.Events) != 0 || len(res.Checkpoints) != 0 || res.Cursor != "" {
		t.Fatalf("Bedrock has no events or checkpoints, got %+v", res)
	}

	got, err = p.Metrics(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	assertMetrics(t, got, []provider.StepMetric{
		{Step: 0, Epoch: 1, TrainLoss: ptr(2.5)},
		{Step: 1, Epoch: 1, TrainLoss: ptr(1.75), ValidLoss: ptr(2)},
		{Step: 2, Epoch: 2, TrainLoss: ptr(1.25)},
		{Step: 3, Epoch: 2, TrainLoss: ptr(1), ValidLoss: ptr(1.5)},
	})
}

func TestMetricsBeforeOutput(t *testing.T) {
	ctx := context.Background()
	srv := bedrocktest.New(t)
	p := newProvider(t, srv)
	train, _ := dataFiles(t)
	req := request(upload(t, p, train, ""))
	job, err := p.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Metrics(ctx, job.ID) // first fetch: still checking data
	if err != nil || len(got) != 0 {
		t.Fatalf("metrics before output = %v, %v", got, err)
	}
}

func TestFailedJob(t *testing.T) {
	ctx := context.Background()
	srv := bedrocktest.New(t)
	sc := bedrocktest.DefaultScript()
	sc.FailMessage = "Training data has 2 records; the minimum is 32."
	srv.SetScript(sc)
	p := newProvider(t, srv)
	train, _ := dataFiles(t)
	job, err := p.Create(ctx, request(upload(t, p, train, "")))
	if err != nil {
		t.Fatal(err)
	}
	var res provider.PollResult
	for range 2 {
		if res, err = p.Poll(ctx, job.ID, ""); err != nil {
			t.Fatal(err)
		}
	}
	if res.Status.State != provider.StateFailed || res.Status.Error != sc.FailMessage || res.Status.ProviderState != "Failed" {
		t.Fatalf("status = %+v", res.Status)
	}
}

func TestCancel(t *testing.T) {
	ctx := context.Background()
	srv := bedrocktest.New(t)
	p := newProvider(t, srv)
	train, _ := dataFiles(t)
	job, err := p.Create(ctx, request(upload(t, p, train, "")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Poll(ctx, job.ID, ""); err != nil {
		t.Fatal(err)
	}
	if err := p.Cancel(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	// Stopping is not over yet; Stopped is cancelled.
	for _, want := range []struct {
		state    provider.State
		provider string
	}{{provider.StateRunning, "Stopping"}, {provider.StateCancelled, "Stopped"}, {provider.StateCancelled, "Stopped"}} {
		res, err := p.Poll(ctx, job.ID, "")
		if err != nil || res.Status.State != want.state || res.Status.ProviderState != want.provider {
			t.Fatalf("after stop = %+v, %v; want %s (%s)", res.Status, err, want.state, want.provider)
		}
	}
	err = p.Cancel(ctx, job.ID)
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.StatusCode != 400 || pe.Code != "ValidationException" || !pe.Permanent ||
		pe.Message != "Job curate-"+jobID+" is Stopped and cannot be stopped." {
		t.Fatalf("second stop = %v", err)
	}
}

// A worker that crashed after each paid call, before storing its answer,
// runs again from the start with a new client: it must adopt what exists.
func TestResumeAfterCrash(t *testing.T) {
	ctx := context.Background()
	srv := bedrocktest.New(t)
	train, valid := dataFiles(t)

	first := newProvider(t, srv)
	files := upload(t, first, train, valid)
	job, err := first.Create(ctx, request(files))
	if err != nil {
		t.Fatal(err)
	}

	again := newProvider(t, srv)
	if files2 := upload(t, again, train, valid); files2 != files {
		t.Fatalf("second upload = %+v, want %+v", files2, files)
	}
	found, ok, err := again.FindJob(ctx, jobID)
	if err != nil || !ok || found.ID != job.ID || found.CurateJobID != jobID || found.BaseModel != haiku {
		t.Fatalf("FindJob = %+v, %v, %v; want %s", found, ok, err, job.ID)
	}
	job2, err := again.Create(ctx, request(files))
	if err != nil || job2.ID != job.ID {
		t.Fatalf("second create = %s, %v; want %s", job2.ID, err, job.ID)
	}
	if o, puts, j := srv.ObjectsCreated(), srv.Puts(), srv.JobsCreated(); o != 2 || puts != 2 || j != 1 {
		t.Fatalf("%d objects, %d puts, %d jobs; want 2, 2, 1", o, puts, j)
	}
}

func TestUploadReplacesDifferentObject(t *testing.T) {
	// An object of another size under the key is not this file: send it.
	srv := bedrocktest.New(t)
	p := newProvider(t, srv)
	train, _ := dataFiles(t)
	upload(t, p, train, "")
	if err := os.WriteFile(train, []byte(trainData+trainData), 0o600); err != nil {
		t.Fatal(err)
	}
	upload(t, p, train, "")
	got, _ := srv.Object(bedrocktest.Bucket, "curate/ft/"+jobID+"/train.jsonl")
	if !bytes.Equal(got, []byte(trainData+trainData)) || srv.Puts() != 2 || srv.ObjectsCreated() != 1 {
		t.Fatalf("after re-upload: %d bytes, %d puts, %d objects", len(got), srv.Puts(), srv.ObjectsCreated())
	}
}

func TestValidate(t *testing.T) {
	srv := bedrocktest.New(t)
	p := newProvider(t, srv)
	num := provider.Num
	type hp = provider.Hyperparameters
	tests := []struct {
		name   string
		method provider.Method
		model  string
		h      provider.Hyperparameters
		fields []string
	}{
		{"all auto", provider.Supervised, haiku, hp{}, nil},
		{"upper ends", provider.Supervised, haiku, hp{Epochs: num(10), BatchSize: num(256), LearningRateMultiplier: num(2), EarlyStoppingThreshold: num(0.1), EarlyStoppingPatience: num(10)}, nil},
		{"lower ends", provider.Supervised, haiku, hp{Epochs: num(1), BatchSize: num(4), LearningRateMultiplier: num(0.1), EarlyStoppingThreshold: num(0), EarlyStoppingPatience: num(1)}, nil},
		{"model ARN", provider.Supervised, "arn:aws:bedrock:us-east-1::foundation-model/" + haiku, hp{}, nil},
		{"epochs 11", provider.Supervised, haiku, hp{Epochs: num(11)}, []string{provider.FieldEpochs}},
		{"batch 3", provider.Supervised, haiku, hp{BatchSize: num(3)}, []string{provider.FieldBatchSize}},
		{"batch 257", provider.Supervised, haiku, hp{BatchSize: num(257)}, []string{provider.FieldBatchSize}},
		{"lr 0.05", provider.Supervised, haiku, hp{LearningRateMultiplier: num(0.05)}, []string{provider.FieldLearningRateMultiplier}},
		{"lr 2.1", provider.Supervised, haiku, hp{LearningRateMultiplier: num(2.1)}, []string{provider.FieldLearningRateMultiplier}},
		{"threshold 0.2", provider.Supervised, haiku, hp{EarlyStoppingThreshold: num(0.2)}, []string{provider.FieldEarlyStoppingThreshold}},
		{"patience 1.5", provider.Supervised, haiku, hp{EarlyStoppingPatience: num(1.5)}, []string{provider.FieldEarlyStoppingPatience}},
		{"beta", provider.Supervised, haiku, hp{Beta: num(0.1)}, []string{provider.FieldBeta}},
		{"dpo", provider.DPO, haiku, hp{}, []string{"method"}},
		{"unknown model", provider.Supervised, "amazon.titan-text-express-v1", hp{}, []string{"base_model"}},
		{"no model", provider.Supervised, "", hp{}, []string{"base_model"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertFields(t, p.Validate(tt.method, tt.model, tt.h), tt.fields...)
		})
	}
}

func TestCreateRefusesBeforeCalling(t *testing.T) {
	srv := bedrocktest.New(t)
	p := newProvider(t, srv)
	seed := int64(7)
	tests := []struct {
		name   string
		edit   func(*provider.CreateRequest)
		fields []string
	}{
		{"seed", func(r *provider.CreateRequest) { r.Seed = &seed }, []string{"seed"}},
		{"suffix with a space", func(r *provider.CreateRequest) { r.Suffix = "support bot" }, []string{"suffix"}},
		{"suffix with doubled hyphens", func(r *provider.CreateRequest) { r.Suffix = "support--bot" }, []string{"suffix"}},
		// 63 - 1 - 36 leaves 26 characters for the suffix.
		{"suffix too long", func(r *provider.CreateRequest) { r.Suffix = strings.Repeat("s", 27) }, []string{"suffix"}},
		{"no training file", func(r *provider.CreateRequest) { r.TrainFileID = "" }, []string{"train_file_id"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := request(provider.UploadResult{TrainFileID: "s3://curate-training/x.jsonl"})
			tt.edit(&req)
			_, err := p.Create(context.Background(), req)
			assertFields(t, err, tt.fields...)
		})
	}
	req := request(provider.UploadResult{TrainFileID: "s3://curate-training/x.jsonl"})
	req.Suffix = strings.Repeat("s", 26)
	if err := p.Validate(req.Method, req.BaseModel, req.Hyper); err != nil {
		t.Fatal(err)
	}
	if n := srv.Hits(false, "POST", "/model-customization-jobs"); n != 0 {
		t.Fatalf("refused requests reached Bedrock %d times", n)
	}
}

func TestUploadChecksFormat(t *testing.T) {
	srv := bedrocktest.New(t)
	p := newProvider(t, srv)
	train, _ := dataFiles(t)
	_, err := p.Upload(context.Background(), provider.UploadRequest{CurateJobID: jobID, TrainPath: train, Format: "openai_chat"})
	assertFields(t, err, "format")
	if srv.Puts() != 0 {
		t.Fatal("a refused upload reached S3")
	}
}

func TestConfigRequired(t *testing.T) {
	ctx := context.Background()
	srv := bedrocktest.New(t)
	for _, tt := range []struct {
		name string
		edit func(*bedrock.Config)
		want string
	}{
		{"bucket", func(c *bedrock.Config) { c.Bucket = "" }, "no S3 bucket"},
		{"role", func(c *bedrock.Config) { c.RoleARN = "curate-bedrock" }, "no service role ARN"},
		{"region", func(c *bedrock.Config) { c.AWS.Region = "" }, "no AWS region"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config(srv, awsConfig())
			tt.edit(&cfg)
			if _, err := bedrock.New(ctx, cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, want %q", err, tt.want)
			}
		})
	}
}

// isolateAWSEnv hides the machine's AWS settings so only what the test
// sets is seen, and keeps the SDK off the instance metadata service.
func isolateAWSEnv(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_ROLE_ARN": "",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_REGION": "us-east-1",
	} {
		t.Setenv(k, v)
	}
}

func TestMissingCredentials(t *testing.T) {
	isolateAWSEnv(t)
	srv := bedrocktest.New(t)
	_, err := bedrock.New(context.Background(), config(srv, nil))
	if err == nil || !strings.Contains(err.Error(), "no AWS credentials") {
		t.Fatalf("New without credentials = %v", err)
	}
}

func TestCredentialsFromEnvironment(t *testing.T) {
	isolateAWSEnv(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDFROMENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	srv := bedrocktest.New(t)
	p, err := bedrock.New(context.Background(), config(srv, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.FindJob(context.Background(), jobID); err != nil {
		t.Fatalf("with credentials from the environment: %v", err)
	}
}

func TestServerErrorRetried(t *testing.T) {
	ctx := context.Background()
	srv := bedrocktest.New(t)
	p := newProvider(t, srv)
	train, _ := dataFiles(t)

	srv.Inject(bedrocktest.Fault{S3: true, Method: "PUT", Status: 503})
	files := upload(t, p, train, "")
	if srv.Puts() != 1 || srv.Hits(true, "PUT", "/curate-training/curate/ft/"+jobID+"/train.jsonl") != 2 {
		t.Fatalf("after one 503: %d puts stored, %d PUT requests", srv.Puts(), srv.Hits(true, "PUT", "/curate-training/curate/ft/"+jobID+"/train.jsonl"))
	}

	srv.Inject(bedrocktest.Fault{Method: "POST", Path: "/model-customization-jobs", Status: 500})
	job, err := p.Create(ctx, request(files))
	if err != nil {
		t.Fatalf("create after one 500: %v", err)
	}
	if h, j := srv.Hits(false, "POST", "/model-customization-jobs"), srv.JobsCreated(); h != 2 || j != 1 {
		t.Fatalf("%d create requests and %d jobs, want 2 and 1", h, j)
	}

	srv.Inject(bedrocktest.Fault{Method: "GET", Path: "/model-customization-jobs/", Status: 429, Times: 2})
	if _, err := p.Poll(ctx, job.ID, ""); err != nil {
		t.Fatalf("poll after two throttles: %v", err)
	}
}

func TestServerErrorsExhaustRetries(t *testing.T) {
	srv := bedrocktest.New(t)
	p := newProvider(t, srv)
	// The standard retryer makes three attempts.
	srv.Inject(bedrocktest.Fault{Method: "GET", Path: "/model-customization-jobs", Status: 503, Times: 3})
	_, _, err := p.FindJob(context.Background(), jobID)
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.StatusCode != 503 || provider.IsPermanent(err) {
		t.Fatalf("after retries ran out = %v", err)
	}
}

func TestBadRequestSurfaced(t *testing.T) {
	srv := bedrocktest.New(t)
	p := newProvider(t, srv)
	req := request(provider.UploadResult{TrainFileID: "s3://curate-training/nope.jsonl"})
	_, err := p.Create(context.Background(), req)
	var pe *provider.Error
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want *provider.Error", err)
	}
	wantMsg := "The provided S3 URI s3://curate-training/nope.jsonl does not exist or Bedrock cannot read it."
	if pe.StatusCode != 400 || pe.Code != "ValidationException" || pe.Message != wantMsg || !pe.Permanent {
		t.Fatalf("error = %+v", pe)
	}
	if want := "bedrock: create job: 400 ValidationException: " + wantMsg; err.Error() != want {
		t.Fatalf("message = %q, want %q", err.Error(), want)
	}
	if n := srv.Hits(false, "POST", "/model-customization-jobs"); n != 1 {
		t.Fatalf("a 400 was retried: %d requests", n)
	}
}

func TestTimeoutRetried(t *testing.T) {
	ctx := context.Background()
	srv := bedrocktest.New(t)
	cfg := awsConfig()
	cfg.HTTPClient = awshttp.NewBuildableClient().WithTimeout(200 * time.Millisecond)
	p, err := bedrock.New(ctx, config(srv, cfg))
	if err != nil {
		t.Fatal(err)
	}
	train, _ := dataFiles(t)
	job, err := p.Create(ctx, request(upload(t, p, train, "")))
	if err != nil {
		t.Fatal(err)
	}
	srv.Inject(bedrocktest.Fault{Method: "GET", Path: "/model-customization-jobs/", Delay: 10 * time.Second})
	start := time.Now()
	res, err := p.Poll(ctx, job.ID, "")
	if err != nil || res.Status.State != provider.StateValidating {
		t.Fatalf("poll after one timeout = %+v, %v", res.Status, err)
	}
	// The first attempt waited out the client's 200ms before the retry.
	if took := time.Since(start); took < 200*time.Millisecond || took > 5*time.Second {
		t.Fatalf("took %v", took)
	}
}

func TestParseMetricsCSV(t *testing.T) {
	// The columns the Bedrock user guide lists for step_wise_training_metrics.csv.
	in := "step_number,epoch_number,training_loss,perplexity\n0,0,2.0786,7.9935\n1,0,1.5,4.4817\n"
	rows, err := bedrock.ParseMetricsCSV(strings.NewReader(in), "training_loss")
	if err != nil {
		t.Fatal(err)
	}
	want := []bedrock.MetricsRow{{Step: 0, Epoch: 0, Loss: 2.0786, Perplexity: 7.9935}, {Step: 1, Epoch: 0, Loss: 1.5, Perplexity: 4.4817}}
	if len(rows) != len(want) || rows[0] != want[0] || rows[1] != want[1] {
		t.Fatalf("rows = %+v, want %+v", rows, want)
	}

	for _, tt := range []struct{ name, in, want string }{
		{"wrong loss column", "step_number,epoch_number,validation_loss,perplexity\n", `no "training_loss" column`},
		{"bad step", "step_number,epoch_number,training_loss,perplexity\n0,0,1,1\nx,0,1,1\n", `line 3: step_number "x"`},
		{"bad loss", "step_number,epoch_number,training_loss,perplexity\n0,0,nan-ish,1\n", `line 2: training_loss "nan-ish"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := bedrock.ParseMetricsCSV(strings.NewReader(tt.in), "training_loss"); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func ptr(f float64) *float64 { return &f }

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
	show := func(ms []provider.StepMetric) string { b, _ := json.Marshal(ms); return string(b) }
	if show(got) != show(want) {
		t.Fatalf("metrics\n got %s\nwant %s", show(got), show(want))
	}
}

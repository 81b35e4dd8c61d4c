package openaitest_test

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/provider/openaitest"
)

func upload(t *testing.T, srv *openaitest.Server, key string) (int, string) {
	t.Helper()
	return uploadFile(t, srv, key, `{"messages":[]}`+"\n")
}

func uploadFile(t *testing.T, srv *openaitest.Server, key, content string) (int, string) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("purpose", "fine-tune")
	fw, _ := mw.CreateFormFile("file", "train.jsonl")
	_, _ = fw.Write([]byte(content))
	_ = mw.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL()+"files", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer sk-test")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var f struct {
		ID string `json:"id"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&f)
	return resp.StatusCode, f.ID
}

func TestIdempotencyKeyReplays(t *testing.T) {
	srv := openaitest.New(t)
	_, a := upload(t, srv, "k1")
	_, b := upload(t, srv, "k1")
	_, c := upload(t, srv, "k2")
	_, d := upload(t, srv, "")
	if a == "" || a != b || c == a || d == a || d == c {
		t.Fatalf("ids %q %q %q %q: the same key must give the same file, others new ones", a, b, c, d)
	}
	if n := srv.FilesCreated(); n != 3 {
		t.Fatalf("files created = %d, want 3", n)
	}
	if n := srv.Hits("POST", "/v1/files"); n != 4 {
		t.Fatalf("hits = %d, want 4", n)
	}
}

func TestRequiresBearerToken(t *testing.T) {
	srv := openaitest.New(t)
	resp, err := http.Get(srv.URL() + "fine_tuning/jobs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status without a token = %d, want 401", resp.StatusCode)
	}
}

func TestFaultIsUsedUp(t *testing.T) {
	srv := openaitest.New(t)
	srv.Inject(openaitest.Fault{Method: "POST", Path: "/v1/files", Status: 500, Times: 2})
	for i, want := range []int{500, 500, 200} {
		if code, _ := upload(t, srv, ""); code != want {
			t.Fatalf("request %d: status %d, want %d", i+1, code, want)
		}
	}
	if n := srv.FilesCreated(); n != 1 {
		t.Fatalf("files created = %d, want 1", n)
	}
}

func TestResultCSV(t *testing.T) {
	got := string(openaitest.ResultCSV(openaitest.DefaultScript().Metrics))
	want := "step,train_loss,train_accuracy,valid_loss,valid_mean_token_accuracy\n" +
		"1,1.5,0.5,,\n2,1.25,0.625,1.375,0.5\n3,0.75,0.75,,\n4,0.5,0.875,0.625,0.75\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// call sends an authorised request and decodes the JSON answer into out.
func call(t *testing.T, method, url string, body string, out any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer sk-dev")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: status %d", method, url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}

// A server from Start runs DevScript's job fetch by fetch: two fetches
// validating, two queued, fourteen running (steps 1 to 14), and the
// nineteenth reveals step 15 and succeeds, billing the training file's
// tokens times the epochs OpenAI's rule gives its size. Its times are
// today's. After Close it answers nothing.
func TestStartRunsDevScript(t *testing.T) {
	srv, err := openaitest.Start(openaitest.WithScript(openaitest.DevScript()))
	if err != nil {
		t.Fatal(err)
	}
	// 40 examples: "auto" is 3 epochs. Each is 13 tokens: 3 to prime the
	// reply, and per message 3 of framing, 1 for the role and 1 for the
	// one-token content.
	_, fileID := uploadFile(t, srv, "", strings.Repeat(`{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello"}]}`+"\n", 40))
	var job struct {
		ID, Status    string
		CreatedAt     int64 `json:"created_at"`
		TrainedTokens int64 `json:"trained_tokens"`
	}
	call(t, http.MethodPost, srv.URL()+"fine_tuning/jobs", `{"model":"gpt-4o-mini-2024-07-18","training_file":"`+fileID+`"}`, &job)

	var seen []string
	for range 19 {
		call(t, http.MethodGet, srv.URL()+"fine_tuning/jobs/"+job.ID, "", &job)
		seen = append(seen, job.Status)
	}
	want := slices.Concat(slices.Repeat([]string{"validating_files"}, 2), slices.Repeat([]string{"queued"}, 2),
		slices.Repeat([]string{"running"}, 14), []string{"succeeded"})
	if !slices.Equal(seen, want) {
		t.Fatalf("statuses %v, want %v", seen, want)
	}
	if job.TrainedTokens != 40*13*3 {
		t.Errorf("trained %d tokens, want 40 × 13 × 3 = %d", job.TrainedTokens, 40*13*3)
	}
	if age := time.Since(time.Unix(job.CreatedAt, 0)); age < -time.Minute || age > time.Minute {
		t.Errorf("created at %s, want about now", time.Unix(job.CreatedAt, 0))
	}

	var cps struct {
		Data []struct {
			StepNumber int `json:"step_number"`
		}
	}
	call(t, http.MethodGet, srv.URL()+"fine_tuning/jobs/"+job.ID+"/checkpoints", "", &cps)
	// Three epochs of five steps: checkpoints after the first two, newest first.
	if len(cps.Data) != 2 || cps.Data[0].StepNumber != 10 || cps.Data[1].StepNumber != 5 {
		t.Fatalf("checkpoints %+v, want steps 10 and 5", cps.Data)
	}

	srv.Close()
	if _, err := http.Get(srv.URL() + "files"); err == nil {
		t.Fatal("the server still answers after Close")
	}
}

// DevScript's loss starts at 2 × 0.88 and falls every step.
func TestDevScriptLossFalls(t *testing.T) {
	ms := openaitest.DevScript().Metrics
	if len(ms) != 15 || *ms[0].TrainLoss != 1.76 {
		t.Fatalf("%d steps, first loss %v; want 15 steps from 1.76", len(ms), *ms[0].TrainLoss)
	}
	for i := 1; i < len(ms); i++ {
		if *ms[i].TrainLoss >= *ms[i-1].TrainLoss {
			t.Fatalf("step %d loss %v does not fall from %v", ms[i].Step, *ms[i].TrainLoss, *ms[i-1].TrainLoss)
		}
	}
}

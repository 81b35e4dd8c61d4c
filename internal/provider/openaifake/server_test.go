package openaifake_test

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"testing"

	"github.com/curate/curate/internal/provider/openaifake"
)

func upload(t *testing.T, srv *openaifake.Server, key string) (int, string) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("purpose", "fine-tune")
	fw, _ := mw.CreateFormFile("file", "train.jsonl")
	_, _ = fw.Write([]byte(`{"messages":[]}` + "\n"))
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
	srv := openaifake.New(t)
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
	srv := openaifake.New(t)
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
	srv := openaifake.New(t)
	srv.Inject(openaifake.Fault{Method: "POST", Path: "/v1/files", Status: 500, Times: 2})
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
	got := string(openaifake.ResultCSV(openaifake.DefaultScript().Metrics))
	want := "step,train_loss,train_accuracy,valid_loss,valid_mean_token_accuracy\n" +
		"1,1.5,0.5,,\n2,1.25,0.625,1.375,0.5\n3,0.75,0.75,,\n4,0.5,0.875,0.625,0.75\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

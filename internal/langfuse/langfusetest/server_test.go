package langfusetest_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/curate/curate/internal/langfuse/langfusetest"
)

// get fetches path from srv with the given keys and decodes the JSON body.
func get(t *testing.T, srv *langfusetest.Server, path, user, pass string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(user, pass)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("GET %s: body is not JSON: %v", path, err)
	}
	return resp.StatusCode, body
}

func TestServerShapes(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	srv := langfusetest.NewServer(t, langfusetest.Options{
		Scores: []langfusetest.Score{
			{ID: "a", TraceID: "tr-1", ObservationID: "obs-1", Name: "helpful", DataType: "BOOLEAN", Value: 1, Comment: "nice", Timestamp: at},
			{ID: "b", TraceID: "tr-1", Name: "output", DataType: "CORRECTION", StringValue: "fixed", Timestamp: at.Add(time.Minute)},
			{ID: "c", TraceID: "tr-1", Name: "rating", DataType: "NUMERIC", Value: 3, Timestamp: at.Add(2 * time.Minute)},
		},
		PageSize: 2,
	})
	pk, sk := srv.PublicKey, srv.SecretKey

	if status, body := get(t, srv, "/api/public/projects", pk, "wrong"); status != http.StatusUnauthorized || body["message"] == nil {
		t.Errorf("wrong secret: %d %v, want 401 with a message", status, body)
	}

	// Core fields only without ?fields=, as Langfuse answers.
	status, body := get(t, srv, "/api/public/v3/scores?limit=100", pk, sk)
	if status != http.StatusOK {
		t.Fatalf("v3: %d %v", status, body)
	}
	data := body["data"].([]any)
	if len(data) != 2 {
		t.Fatalf("v3 page has %d scores, want PageSize 2", len(data))
	}
	first := data[0].(map[string]any)
	if first["id"] != "c" || first["value"] != 3.0 {
		t.Errorf("first v3 score = %v, want the newest, c, with value 3", first)
	}
	if _, has := first["subject"]; has {
		t.Errorf("subject sent without fields=subject: %v", first)
	}
	meta := body["meta"].(map[string]any)
	cursor, _ := meta["cursor"].(string)
	if cursor == "" {
		t.Fatalf("meta %v has no cursor though a third score remains", meta)
	}

	status, body = get(t, srv, "/api/public/v3/scores?fields=subject,details&cursor="+cursor, pk, sk)
	if status != http.StatusOK {
		t.Fatalf("v3 page 2: %d %v", status, body)
	}
	last := body["data"].([]any)
	if len(last) != 1 {
		t.Fatalf("second page has %d scores, want 1", len(last))
	}
	a := last[0].(map[string]any)
	subject := a["subject"].(map[string]any)
	if a["id"] != "a" || a["value"] != true || a["comment"] != "nice" || subject["kind"] != "observation" || subject["traceId"] != "tr-1" {
		t.Errorf("score a = %v, want boolean true on observation obs-1 of tr-1 with its comment", a)
	}
	if _, has := body["meta"].(map[string]any)["cursor"]; has {
		t.Errorf("last page has a cursor: %v", body["meta"])
	}

	status, body = get(t, srv, "/api/public/v2/scores?page=2", pk, sk)
	wantMeta := map[string]any{"page": 2.0, "limit": 2.0, "totalItems": 3.0, "totalPages": 2.0}
	if status != http.StatusOK || !equalMaps(body["meta"].(map[string]any), wantMeta) {
		t.Errorf("v2 page 2: %d meta %v, want %v", status, body["meta"], wantMeta)
	}

	if status, _ := get(t, srv, "/api/public/v3/scores?fields=trace", pk, sk); status != http.StatusBadRequest {
		t.Errorf("unknown field group: %d, want 400", status)
	}
	if status, _ := get(t, srv, "/api/public/v3/scores?limit=101", pk, sk); status != http.StatusBadRequest {
		t.Errorf("limit 101: %d, want 400", status)
	}
	if status, _ := get(t, srv, "/api/public/traces/nope", pk, sk); status != http.StatusNotFound {
		t.Errorf("unknown trace: %d, want 404", status)
	}
	if n := srv.Requests(langfusetest.EndpointScoresV3); n != 4 {
		t.Errorf("v3 requests = %d, want 4", n)
	}
}

func equalMaps(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

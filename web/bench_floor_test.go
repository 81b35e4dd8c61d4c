package web_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
)

// floorFeedbackServer starts the least a feedback POST can be: net/http,
// one JSON decode and the one-row INSERT Curate runs (the same statement,
// the same row), on a pool of its own sized as Curate's is. No middleware,
// no authentication, no validation, no PII scan, no metrics: the floor
// that HTTP and Postgres allow, which Curate's figure is measured against.
// It answers 201 with the stored row's id and seq.
func floorFeedbackServer(b testing.TB, dbURL string, org uuid.UUID) string {
	b.Helper()
	pcfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		b.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	q := db.New(pool)
	type item struct {
		ExternalID   string   `json:"external_id"`
		UserID       string   `json:"user_id"`
		Query        string   `json:"query"`
		Response     string   `json:"response"`
		FeedbackType string   `json:"feedback_type"`
		Rating       *int16   `json:"rating"`
		Model        string   `json:"model"`
		Tags         []string `json:"tags"`
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var it item
		if err := json.NewDecoder(r.Body).Decode(&it); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		id, _ := uuid.NewV7()
		rating := pgtype.Int2{}
		if it.Rating != nil {
			rating = pgtype.Int2{Int16: *it.Rating, Valid: true}
		}
		hash := sha256.Sum256([]byte(it.Query + "\x00" + it.Response))
		row, err := q.FeedbackInsert(r.Context(), db.FeedbackInsertParams{ID: id, OrgID: org,
			ExternalID: pgtype.Text{String: it.ExternalID, Valid: it.ExternalID != ""}, EndUserID: it.UserID,
			Query: it.Query, Response: it.Response, Context: []byte("{}"), Model: it.Model, FeedbackType: db.FeedbackType(it.FeedbackType),
			Rating: rating, Tags: it.Tags, Source: db.FeedbackSourceApi, PiiKinds: []string{}, ContentHash: hash[:],
			Status: db.ReviewStatusPending})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "seq": row.Seq.Int64})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/blobstore"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/scratch"
)

// The CLI freezes and exports through the same code as the pages and the
// job: its files are byte for byte those the export job stores.
func TestDatasetFreezeAndExport(t *testing.T) {
	ctx := context.Background()
	pool, url := pgtest.NewDBURL(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("CURATE_DATA_DIR", t.TempDir())
	org, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	var ids []uuid.UUID
	for i := range 12 {
		prompt, _ := json.Marshal([]map[string]string{{"role": "user", "content": fmt.Sprintf("Question %d?", i)}})
		sum := sha256.Sum256([]byte{byte(i)})
		var id uuid.UUID
		if err := pool.QueryRow(ctx, `INSERT INTO preference_pairs (org_id, prompt, query, chosen_response, rejected_response, method, content_hash)
			VALUES ($1, $2, $3, $4, 'Meh.', 'manual', $5) RETURNING id`, org.ID, prompt, fmt.Sprintf("Question %d?", i), fmt.Sprintf("Answer %d, mail help@acme.test.", i), sum[:]).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	bucket, err := blobstore.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	inserter, err := jobq.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	tmp, err := scratch.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer tmp.Close()
	svc := datasets.New(pool, inserter, bucket, tmp)
	d, err := svc.Create(ctx, audit.System, org.ID, datasets.NewDataset{Type: datasets.TypeDPO, Settings: datasets.Settings{Name: "CLI", ValidationPercent: 20, SplitSeed: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AddMembers(ctx, audit.System, org.ID, d.ID, ids); err != nil {
		t.Fatal(err)
	}

	// Exporting before freezing: a clear error.
	_, _, err = runCLI(t, "", "export", "--dataset", d.ID.String(), "--format", "trl_preference", "--out", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "mark it ready") {
		t.Fatalf("export before freeze: %v", err)
	}

	out, _, err := runCLI(t, "", "dataset", "freeze", d.ID.String())
	if err != nil {
		t.Fatal(err)
	}
	var hash string
	if err := pool.QueryRow(ctx, "SELECT content_hash FROM dataset_versions WHERE dataset_id = $1", d.ID).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	// 12 × 20% = 2.4 → 2 validation items.
	if want := "version 1\nsha256 " + hash + "\nitems 12 (train 10, validation 2)\n"; out != want {
		t.Fatalf("freeze printed %q, want %q", out, want)
	}

	dir := filepath.Join(t.TempDir(), "out")
	out, _, err = runCLI(t, "", "export", "--dataset", d.ID.String(), "--format", "trl_preference", "--out", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "dataset version "+hash) {
		t.Fatalf("export printed %q", out)
	}

	// The job's files for the same version and format.
	ex, _, err := svc.StartExport(ctx, audit.System, org.ID, d.ID, datasets.ExportRequest{Format: "trl_preference", MaskPII: true})
	if err != nil {
		t.Fatal(err)
	}
	exportID := ex.ID
	if err := svc.RunExport(ctx, exportID); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"train.jsonl", "validation.jsonl", "manifest.json"} {
		local, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		f, err := svc.OpenFile(ctx, org.ID, d.ID, exportID, name)
		if err != nil {
			t.Fatal(err)
		}
		var stored bytes.Buffer
		_, _ = stored.ReadFrom(f)
		f.Close()
		if !bytes.Equal(local, stored.Bytes()) {
			t.Fatalf("%s from the CLI differs from the job's", name)
		}
		if strings.Contains(string(local), "help@acme.test") {
			t.Fatalf("%s: PII not masked", name)
		}
	}
	if _, _, err := runCLI(t, "", "export", "--dataset", d.ID.String(), "--format", "nope", "--out", dir); err == nil || !strings.Contains(err.Error(), "unknown export format") {
		t.Fatalf("bad format: %v", err)
	}
}

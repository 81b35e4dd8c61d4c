package web_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/imports"
	"github.com/curate/curate/internal/pairs"
	"github.com/curate/curate/internal/publicdata"
	"github.com/curate/curate/internal/validate"
	"github.com/curate/curate/web/webtest"
)

// flowCorrections is how many feedback items the flow corrects.
const flowCorrections = 12

// flowSample is the path of the HH-RLHF sample the flow imports. Without
// the public data the test skips (fails in CI): call it before starting a
// server, so that a skip stops nothing half-started.
func flowSample(t *testing.T) string {
	t.Helper()
	return publicdata.Path(t, "hh-rlhf", "harmless-base-test.part1.jsonl.gz")
}

// flowMaterial stores what a curator starts from: feedback with corrected
// answers, each made into a correction pair (the correction chosen over
// the answer given), and the HH-RLHF sample imported as pairs. It returns
// the imported pairs' ids. The sample is public data, hhRLHF its path
// from flowSample.
func flowMaterial(t *testing.T, s *webtest.Server, org, curator uuid.UUID, hhRLHF string) []uuid.UUID {
	t.Helper()
	bg := context.Background()
	store := feedback.New(s.Pool)
	reviewer := audit.Actor{Kind: "user", ID: curator, Label: "cora@acme.test"}
	for i := range flowCorrections {
		row, _, err := store.Ingest(bg, org, "api", feedback.Item{Query: fmt.Sprintf("How do I rotate API key %d?", i),
			Response: "No idea.", FeedbackType: "thumbs_down"})
		if err != nil {
			t.Fatal(err)
		}
		fix := fmt.Sprintf("Open Settings > API keys, pick key %d and choose Rotate.", i)
		if _, err := store.Update(bg, reviewer, org, row.ID, 1, feedback.Change{Correction: &fix}); err != nil {
			t.Fatal(err)
		}
	}
	ps := pairs.New(s.Pool)
	gen, err := ps.Generate(bg, reviewer, org, pairs.Generation{Method: "correction"})
	if err != nil {
		t.Fatal(err)
	}
	if gen.Created != flowCorrections {
		t.Fatalf("%d correction pairs from %d corrections", gen.Created, flowCorrections)
	}
	fi, err := os.Stat(hhRLHF)
	if err != nil {
		t.Fatal(err)
	}
	imp := s.App.Services.Imports
	run, err := imp.Start(bg, reviewer, imports.NewRun{OrgID: org, Kind: imports.KindHHRLHF, FileName: filepath.Base(hhRLHF), Size: fi.Size()})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := imp.Run(bg, org, run.ID, hhRLHF, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.PairIDs) != sum.Stored || sum.Stored < 1000 {
		t.Fatalf("import stored %d pairs, returned %d ids", sum.Stored, len(sum.PairIDs))
	}
	return sum.PairIDs
}

// multiTurn returns the organisation's pairs whose prompt is not a single
// message: OpenAI's preference format takes one user turn only.
func multiTurn(t *testing.T, s *webtest.Server, org uuid.UUID) []string {
	t.Helper()
	rows, err := s.Pool.Query(context.Background(), `SELECT id::text FROM preference_pairs
		WHERE org_id = $1 AND jsonb_array_length(prompt) <> 1 ORDER BY id`, org)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// checkExportFile reads a downloaded export file with the format's reader
// and runs the validator over its lines: every line must parse, and no
// finding may block. It returns the lines' examples as SFT conversations
// (preference lines with their chosen reply) and the rejected replies.
func checkExportFile(t *testing.T, f export.Format, name, body string) (sft []export.SFTExample, rejected []string) {
	t.Helper()
	v, err := validate.New(validate.Options{Format: f, MinExamples: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if f.KeepsRejected() {
		err = export.ReadPref(ctx, f, strings.NewReader(body), func(_ int, ex export.PrefExample) error {
			v.AddPref(ex)
			sft = append(sft, ex.SFT())
			rejected = append(rejected, ex.Rejected)
			return nil
		})
	} else {
		err = export.ReadSFT(ctx, f, strings.NewReader(body), func(_ int, ex export.SFTExample) error {
			v.AddSFT(ex)
			sft = append(sft, ex)
			return nil
		})
	}
	if err != nil {
		t.Fatalf("%s %s: %v", f, name, err)
	}
	if r := v.Report(); r.Blocking() {
		t.Fatalf("%s %s: %d blocking findings: %+v", f, name, r.Errors, r.Findings)
	}
	return sft, rejected
}

// The "done when": a curator turns corrected feedback and an
// imported HH-RLHF file into a dataset, reads its validation report,
// freezes it and downloads OpenAI preference, TRL and Bedrock exports
// whose lines meet each format's rules. A preference dataset exports to
// Bedrock's chat format with the chosen reply as the assistant's turn.
func TestDatasetFlowAPI(t *testing.T) {
	t.Parallel()
	sample := flowSample(t)
	s := webtest.New(t, webtest.Options{Workers: 2})
	org := s.Org("acme")
	uid := s.User(org, "cora@acme.test", "curator")
	key := s.APIKey(org, "curation", "curator")
	imported := flowMaterial(t, s, org, uid, sample)
	multi := multiTurn(t, s, org)
	if len(multi) == 0 || len(multi) == len(imported) {
		t.Fatalf("%d of %d imported pairs are multi-turn: the sample should hold both kinds", len(multi), len(imported))
	}

	var d datasetDoc
	s.API(key, http.MethodPost, "/api/training-datasets", map[string]any{
		"name": "Support + HH harmless", "dataset_type": "preference_pairs",
		"split": map[string]any{"strategy": "random", "validation_percent": 10, "seed": 7},
	}).Must(t, http.StatusCreated).JSON(t, &d)
	base := "/api/training-datasets/" + d.ID
	var added struct{ Added int }
	s.API(key, http.MethodPost, base+"/members", map[string]any{"add": imported}).Must(t, http.StatusOK).JSON(t, &added)
	if added.Added != len(imported) {
		t.Fatalf("added %d of %d imported pairs", added.Added, len(imported))
	}
	s.API(key, http.MethodPost, base+"/members", map[string]any{"filter": map[string]string{"method": "correction"}}).
		Must(t, http.StatusOK).JSON(t, &added)
	if added.Added != flowCorrections {
		t.Fatalf("the correction filter added %d, want %d", added.Added, flowCorrections)
	}
	total := len(imported) + flowCorrections

	type report struct {
		Blocked bool `json:"blocked"`
		Report  struct {
			Examples int                    `json:"examples"`
			Errors   int                    `json:"errors"`
			Findings []validate.CodeSummary `json:"findings"`
		} `json:"report"`
	}
	validation := func(format string) report {
		var r report
		s.API(key, http.MethodGet, base+"/validation?format="+format, nil).Must(t, http.StatusOK).JSON(t, &r)
		return r
	}
	// OpenAI's preference format refuses each multi-turn HH-RLHF prompt.
	// TRL takes them all. Bedrock takes multi-turn conversations, but not
	// the few HH-RLHF transcripts with two assistant turns in a row.
	if r := validation("openai_preference"); !r.Blocked || r.Report.Examples != total || r.Report.Errors < len(multi) {
		t.Fatalf("openai_preference report before: %+v (want blocked, %d examples, %d+ errors)", r, total, len(multi))
	}
	if r := validation("trl_preference"); r.Blocked || r.Report.Examples != total {
		t.Fatalf("trl_preference report: %+v", r)
	}
	r := validation("bedrock_chat")
	for _, c := range r.Report.Findings {
		if c.Severity == validate.Error && (c.Code != validate.CodeRolesNotAlternating || c.Count > len(multi)) {
			t.Fatalf("bedrock_chat report: %d %s errors", c.Count, c.Code)
		}
	}
	// The curator drops the multi-turn pairs; every format then passes.
	var removed struct{ Removed int }
	s.API(key, http.MethodPost, base+"/members", map[string]any{"remove": multi}).Must(t, http.StatusOK).JSON(t, &removed)
	if removed.Removed != len(multi) {
		t.Fatalf("removed %d of %d", removed.Removed, len(multi))
	}
	total -= len(multi)
	for _, f := range []string{"openai_preference", "trl_preference", "bedrock_chat"} {
		if r := validation(f); r.Blocked || r.Report.Examples != total {
			t.Fatalf("%s report after removing multi-turn pairs: %+v", f, r)
		}
	}

	s.API(key, http.MethodPatch, base, map[string]any{"status": "ready"}).Must(t, http.StatusOK).JSON(t, &d)
	if d.Status != "ready" || d.CurrentVersion == nil || d.CurrentVersion.ItemCount != total {
		t.Fatalf("after freezing: %+v", d)
	}
	// A frozen version's report is stored once and read back: what is read
	// back equals the report computed from scratch over the items.
	for _, f := range []string{"openai_preference", "trl_preference", "bedrock_chat"} {
		path := base + "/validation?format=" + f
		first := s.API(key, http.MethodGet, path, nil).Must(t, http.StatusOK).Body
		var stored int
		if err := s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM dataset_version_reports WHERE format = $1`, f).Scan(&stored); err != nil || stored == 0 {
			t.Fatalf("%s: %d reports stored, %v", f, stored, err)
		}
		if again := s.API(key, http.MethodGet, path, nil).Must(t, http.StatusOK).Body; again != first {
			t.Fatalf("%s: the stored report reads back differently:\n%s\n%s", f, first, again)
		}
		if _, err := s.Pool.Exec(context.Background(), `DELETE FROM dataset_version_reports`); err != nil {
			t.Fatal(err)
		}
		if fresh := s.API(key, http.MethodGet, path, nil).Must(t, http.StatusOK).Body; fresh != first {
			t.Fatalf("%s: the stored report differs from one computed from scratch:\n%s\n%s", f, first, fresh)
		}
	}

	for _, f := range []export.Format{export.OpenAIPreference, export.TRLPreference, export.BedrockChat} {
		var e exportDoc
		s.API(key, http.MethodPost, base+"/export", map[string]any{"format": f}).Must(t, http.StatusAccepted).JSON(t, &e)
		e = waitExport(t, s, key, d.ID, e.ID)
		if e.Status != "succeeded" || e.RowsDone != total {
			t.Fatalf("%s export: %+v", f, e)
		}
		rows, corrections, multiTurns := 0, 0, 0
		for _, file := range e.Files {
			if file.Name == "manifest.json" {
				continue
			}
			body := s.API(key, http.MethodGet, file.URL, nil).Must(t, http.StatusOK).Body
			sft, rejected := checkExportFile(t, f, file.Name, body)
			rows += len(sft)
			for i, ex := range sft {
				last := ex.Messages[len(ex.Messages)-1]
				if last.Role != "assistant" {
					t.Fatalf("%s %s line %d ends with %s", f, file.Name, i+1, last.Role)
				}
				if strings.HasSuffix(last.Content, "and choose Rotate.") {
					corrections++
					if f.KeepsRejected() && rejected[i] != "No idea." {
						t.Fatalf("%s %s line %d: rejected %q, want the answer given", f, file.Name, i+1, rejected[i])
					}
				}
				if len(ex.Messages) > 2 {
					multiTurns++
				}
			}
		}
		if rows != total || corrections != flowCorrections || multiTurns != 0 {
			t.Fatalf("%s: %d rows (want %d), %d corrections (want %d), %d multi-turn", f, rows, total, corrections, flowCorrections, multiTurns)
		}
	}
}

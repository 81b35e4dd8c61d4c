package datasets_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"
	"gocloud.dev/blob"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/blobstore"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/validate"
)

const secretEmail = "ada.lovelace@example.com"

// frozenPairs makes a ready DPO dataset of 12 pairs, one of which mentions
// an e-mail address, split 9 / 3.
func frozenPairs(t *testing.T, e env) (db.TrainingDataset, db.DatasetVersion) {
	t.Helper()
	ctx := context.Background()
	ids := e.pairs(t, 11)
	ids = append(ids, e.pair(t, "Who do I write to?", "Write to "+secretEmail+" and we answer within a day.", "Nobody."))
	d := e.dataset(t, datasets.TypeDPO, datasets.Settings{ValidationPercent: 25, SplitSeed: 5, SystemPrompt: "You are the support assistant."})
	if _, err := e.svc.AddMembers(ctx, e.actor, e.org, d.ID, ids); err != nil {
		t.Fatal(err)
	}
	v, err := e.svc.Freeze(ctx, e.actor, e.org, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	return d, v
}

func read(t *testing.T, b *blob.Bucket, key string) []byte {
	t.Helper()
	data, err := b.ReadAll(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// list returns the keys under prefix.
func list(t *testing.T, b *blob.Bucket, prefix string) []string {
	t.Helper()
	var keys []string
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, obj.Key)
	}
	return keys
}

// checkFile re-reads an export file with the format's reader (or decodes
// its lines where export has no reader) and returns its examples' texts.
func checkFile(t *testing.T, f export.Format, data []byte) (n int, texts []string, prefs []export.PrefExample, sfts []export.SFTExample) {
	t.Helper()
	ctx := context.Background()
	switch f {
	case export.OpenAIPreference, export.TRLPreference:
		err := export.ReadPref(ctx, f, bytes.NewReader(data), func(_ int, p export.PrefExample) error {
			prefs = append(prefs, p)
			texts = append(texts, p.Chosen, p.Rejected)
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		return len(prefs), texts, prefs, nil
	case export.OpenAIChat, export.BedrockChat:
		err := export.ReadSFT(ctx, f, bytes.NewReader(data), func(_ int, s export.SFTExample) error {
			sfts = append(sfts, s)
			texts = append(texts, s.Messages[len(s.Messages)-1].Content)
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		return len(sfts), texts, nil, sfts
	case export.Parquet:
		rows, err := parquet.Read[export.ParquetPrefRow](bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatalf("parquet: %v", err)
		}
		for _, r := range rows {
			if len(r.Chosen) != 1 || len(r.Rejected) != 1 || r.Prompt[0].Role != "system" {
				t.Fatalf("parquet row %+v", r)
			}
			texts = append(texts, r.Chosen[0].Content)
		}
		return len(rows), texts, nil, nil
	}
	// The other formats: one JSON object per line with the format's keys.
	want := map[export.Format][]string{
		export.AnthropicText: {"input", "output"},
		export.ShareGPT:      {"conversations"},
		export.Alpaca:        {"instruction", "input", "output", "system"},
	}[f]
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &obj); err != nil {
			t.Fatalf("%s line %d: %v", f, n+1, err)
		}
		for _, k := range want {
			if _, ok := obj[k]; !ok {
				t.Fatalf("%s line %d lacks %q: %s", f, n+1, k, sc.Text())
			}
		}
		if f == export.AnthropicText {
			var in string
			_ = json.Unmarshal(obj["input"], &in)
			if !strings.HasPrefix(in, "You are the support assistant.\n\nHuman: ") || !strings.HasSuffix(in, "\n\nAssistant:") {
				t.Fatalf("anthropic_text input %q", in)
			}
		}
		texts = append(texts, sc.Text())
		n++
	}
	return n, texts, nil, nil
}

func TestWriteFilesEveryFormat(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	_, v := frozenPairs(t, e)
	bucket, err := blobstore.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()

	for _, f := range export.Formats() {
		t.Run(string(f), func(t *testing.T) {
			m, err := datasets.WriteFiles(ctx, e.pool, bucket, e.svc.Scratch, "a/"+string(f)+"/", v, f, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			if m.Format != f || m.DatasetVersion != v.ContentHash || m.SplitSeed != 5 || m.Counts["train"] != 9 || m.Counts["validation"] != 3 {
				t.Fatalf("manifest %+v", m)
			}
			mf, err := export.ReadManifest(bytes.NewReader(read(t, bucket, "a/"+string(f)+"/manifest.json")))
			if err != nil {
				t.Fatal(err)
			}
			total := 0
			var allPrefs []export.PrefExample
			var allSFT []export.SFTExample
			for _, file := range mf.Files {
				data := read(t, bucket, "a/"+string(f)+"/"+file.Name)
				sum := sha256.Sum256(data)
				if hex.EncodeToString(sum[:]) != file.SHA256 || int64(len(data)) != file.Bytes {
					t.Fatalf("%s: manifest sha256/bytes do not match the file", file.Name)
				}
				n, texts, prefs, sfts := checkFile(t, f, data)
				if n != file.Rows || n != mf.Counts[file.Split] {
					t.Fatalf("%s: %d rows, manifest says %d", file.Name, n, file.Rows)
				}
				joined := strings.Join(texts, "\n")
				if strings.Contains(joined, secretEmail) {
					t.Fatalf("%s: the e-mail address was not masked", file.Name)
				}
				total += n
				allPrefs = append(allPrefs, prefs...)
				allSFT = append(allSFT, sfts...)
			}
			if total != 12 {
				t.Fatalf("%d rows in all", total)
			}
			// The files pass the format's validation once read back.
			if len(allPrefs)+len(allSFT) > 0 {
				val, err := validate.New(validate.Options{Format: f})
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range allPrefs {
					val.AddPref(p)
				}
				for _, s := range allSFT {
					val.AddSFT(s)
				}
				if r := val.Report(); r.Blocking() || r.Examples != 12 {
					t.Fatalf("validation of the re-read file: %+v", r.Findings)
				}
			}
			// The bucket holds the three files and nothing else; the
			// partial files are gone.
			if keys := list(t, bucket, "a/"+string(f)+"/"); len(keys) != 3 {
				t.Fatalf("the export's prefix holds %v", keys)
			}
			if left := e.scratchFiles(t); len(left) != 0 {
				t.Fatalf("partial files left behind: %v", left)
			}
		})
	}
}

func TestReExportIsByteIdenticalAndMasking(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	_, v := frozenPairs(t, e)
	bucket, _ := blobstore.OpenDir(t.TempDir())
	defer bucket.Close()
	for _, f := range []export.Format{export.TRLPreference, export.Parquet, export.OpenAIChat} {
		if _, err := datasets.WriteFiles(ctx, e.pool, bucket, e.svc.Scratch, "one/", v, f, true, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := datasets.WriteFiles(ctx, e.pool, bucket, e.svc.Scratch, "two/", v, f, true, nil); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"train" + f.Ext(), "validation" + f.Ext(), "manifest.json"} {
			if !bytes.Equal(read(t, bucket, "one/"+name), read(t, bucket, "two/"+name)) {
				t.Fatalf("%s %s differs between two exports of one version", f, name)
			}
		}
	}
	// Without masking the address is kept.
	if _, err := datasets.WriteFiles(ctx, e.pool, bucket, e.svc.Scratch, "raw/", v, export.TRLPreference, false, nil); err != nil {
		t.Fatal(err)
	}
	raw := string(read(t, bucket, "raw/train.jsonl")) + string(read(t, bucket, "raw/validation.jsonl"))
	masked := string(read(t, bucket, "one/train.jsonl")) + string(read(t, bucket, "one/validation.jsonl"))
	if !strings.Contains(raw, secretEmail) || strings.Contains(masked, secretEmail) || !strings.Contains(masked, "[EMAIL]") {
		t.Fatal("masking: the unmasked export lacks the address, or the masked one has it")
	}
}

func TestStartAndRunExport(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	d, v := frozenPairs(t, e)

	// Unmasked export: refused to a curator, allowed to an admin and audited.
	_, _, err := e.svc.StartExport(ctx, e.actor, e.org, d.ID, datasets.ExportRequest{Format: "trl_preference"})
	if !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("unmasked by a curator: %v", err)
	}
	if n := e.exportJobs(t, uuid.Nil); n != 0 {
		t.Fatalf("%d export jobs queued for a refused export", n)
	}
	admin := audit.Actor{Kind: "api_key", ID: uuid.New(), Label: "admin key"}
	ex, _, err := e.svc.StartExport(ctx, admin, e.org, d.ID, datasets.ExportRequest{Format: "trl_preference", Admin: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, e.pool, "SELECT count(*) FROM audit_log WHERE action = 'dataset.export_unmasked' AND actor_label = 'admin key'"); n != 1 {
		t.Fatalf("%d unmasked-export audit entries", n)
	}
	// The export's row and its job were stored together.
	if n := e.exportJobs(t, ex.ID); n != 1 || ex.Status != "queued" || ex.RowsTotal != 12 || ex.VersionID != v.ID {
		t.Fatalf("export %+v with %d jobs", ex, n)
	}
	if err := e.svc.RunExport(ctx, ex.ID); err != nil {
		t.Fatal(err)
	}
	got, _ := e.svc.Get(ctx, e.org, d.ID)
	if got.Dataset.Status != "exported" || got.Exports[0].Status != "succeeded" || got.Exports[0].RowsDone != 12 {
		t.Fatalf("after the job: dataset %s, export %+v", got.Dataset.Status, got.Exports[0])
	}
	// An unmasked export is not what the list's quality score describes.
	if got.Dataset.QualityScore.Valid {
		t.Fatalf("an unmasked export recorded quality %v", got.Dataset.QualityScore)
	}
	if names := datasets.FileNames(got.Exports[0]); strings.Join(names, ",") != "train.jsonl,validation.jsonl,manifest.json" {
		t.Fatalf("files %v", names)
	}
	file, err := e.svc.OpenFile(ctx, e.org, d.ID, ex.ID, "train.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(file)
	file.Close()
	if len(body) == 0 || file.ContentType != "application/jsonl" {
		t.Fatalf("download: %d bytes, %s", len(body), file.ContentType)
	}
	// Another organisation, another dataset or an unlisted name: not found.
	for _, c := range []struct {
		org, ds uuid.UUID
		name    string
	}{{uuid.New(), d.ID, "train.jsonl"}, {e.org, uuid.New(), "train.jsonl"}, {e.org, d.ID, "../secret"}, {e.org, d.ID, ".partial-train.jsonl"}} {
		if _, err := e.svc.OpenFile(ctx, c.org, c.ds, ex.ID, c.name); !errors.Is(err, errs.ErrNotFound) {
			t.Errorf("open %v: %v", c, err)
		}
	}
	// Running the job again changes nothing.
	if err := e.svc.RunExport(ctx, ex.ID); err != nil {
		t.Fatal(err)
	}
	// The exported version is exported again without freezing anew; an
	// export in another format leaves the quality score alone, and the
	// masked export in the target format records its report's score.
	pq, _, err := e.svc.StartExport(ctx, e.actor, e.org, d.ID, datasets.ExportRequest{Format: "parquet", MaskPII: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.RunExport(ctx, pq.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.svc.Get(ctx, e.org, d.ID); got.Dataset.QualityScore.Valid {
		t.Fatalf("a parquet export recorded the trl_preference quality score %v", got.Dataset.QualityScore)
	}
	target, rep, err := e.svc.StartExport(ctx, e.actor, e.org, d.ID, datasets.ExportRequest{Format: d.ExportFormat, MaskPII: true})
	if err != nil || rep.Report == nil {
		t.Fatalf("target-format export: %+v %v", rep, err)
	}
	if got, _ := e.svc.Get(ctx, e.org, d.ID); got.Dataset.QualityScore.Valid {
		t.Fatal("the quality score was recorded before the export ran")
	}
	if err := e.svc.RunExport(ctx, target.ID); err != nil {
		t.Fatal(err)
	}
	got, _ = e.svc.Get(ctx, e.org, d.ID)
	if !got.Dataset.QualityScore.Valid || float64(got.Dataset.QualityScore.Float32) != float64(float32(rep.QualityScore)) {
		t.Fatalf("quality score %v after the export, want the report's %v", got.Dataset.QualityScore, rep.QualityScore)
	}
}

func TestExportBlockedByValidation(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	// Three pairs: OpenAI's DPO format needs at least 10 examples.
	d := e.dataset(t, datasets.TypeDPO, datasets.Settings{ExportFormat: "openai_preference"})
	if _, err := e.svc.AddMembers(ctx, e.actor, e.org, d.ID, e.pairs(t, 3)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Freeze(ctx, e.actor, e.org, d.ID); err != nil {
		t.Fatal(err)
	}
	_, rep, err := e.svc.StartExport(ctx, e.actor, e.org, d.ID, datasets.ExportRequest{Format: "openai_preference", MaskPII: true})
	var inv *errs.Invalid
	if !errors.As(err, &inv) || inv.Errors[0].Field != "report.too_few_examples" || rep.Report == nil || !rep.Blocking() {
		t.Fatalf("want a too_few_examples refusal, got %v", err)
	}
	if n := count(t, e.pool, "SELECT count(*) FROM dataset_exports"); n != 0 || e.exportJobs(t, uuid.Nil) != 0 {
		t.Fatalf("%d exports recorded for a refused export", n)
	}
	// trl_preference has no minimum: the same version exports.
	if _, _, err := e.svc.StartExport(ctx, e.actor, e.org, d.ID, datasets.ExportRequest{Format: "trl_preference", MaskPII: true}); err != nil {
		t.Fatal(err)
	}
	// An instruction dataset cannot go to a preference-only format.
	d2 := e.dataset(t, datasets.TypeInstructionTuning, datasets.Settings{Name: "sft"})
	if _, err := e.svc.Update(ctx, e.actor, e.org, d2.ID, 0, func(s *datasets.Settings) { s.ExportFormat = "trl_preference" }); err == nil ||
		!strings.Contains(err.Error(), "cannot hold sft examples") {
		t.Fatalf("sft dataset targeting trl_preference: %v", err)
	}
}

// The CLI writes to a directory: the same files as the job.
func TestWriteFilesToDirectory(t *testing.T) {
	e := newEnv(t)
	_, v := frozenPairs(t, e)
	dir := t.TempDir()
	b, err := blobstore.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := datasets.WriteFiles(context.Background(), e.pool, b, e.svc.Scratch, "", v, export.OpenAIChat, true, nil); err != nil {
		t.Fatal(err)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "*"))
	var names []string
	for _, m := range matches {
		names = append(names, filepath.Base(m))
	}
	if strings.Join(names, ",") != "manifest.json,train.jsonl,validation.jsonl" {
		t.Fatalf("directory holds %v", names)
	}
}

// Versions above the in-request limit are validated by the job, which
// fails the export, writing nothing, when the report has errors.
func TestLargeExportValidatedByJob(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.svc.SyncValidationLimit = 2
	d := e.dataset(t, datasets.TypeDPO, datasets.Settings{ExportFormat: "openai_preference"})
	if _, err := e.svc.AddMembers(ctx, e.actor, e.org, d.ID, e.pairs(t, 3)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Freeze(ctx, e.actor, e.org, d.ID); err != nil {
		t.Fatal(err)
	}
	ex, _, err := e.svc.StartExport(ctx, e.actor, e.org, d.ID, datasets.ExportRequest{Format: "openai_preference", MaskPII: true})
	if err != nil {
		t.Fatal(err)
	}
	err = e.svc.RunExport(ctx, ex.ID)
	if !errors.Is(err, datasets.ErrBlocked) || !strings.Contains(err.Error(), "too_few_examples") {
		t.Fatalf("run: %v", err)
	}
	got, _ := e.svc.Get(ctx, e.org, d.ID)
	if ex := got.Exports[0]; ex.Status != "failed" || !strings.Contains(ex.Error, "too_few_examples") || got.Dataset.Status != "ready" {
		t.Fatalf("export %+v, dataset %s", ex, got.Dataset.Status)
	}
	if ok, _ := e.svc.Bucket.Exists(ctx, datasets.ExportPrefix(got.Exports[0])+"train.jsonl"); ok {
		t.Fatal("a blocked export wrote files")
	}
}

// A retried export starts over: what a killed try left under the export's
// prefix (a half-stored object, a file stored before the export was
// recorded) is removed, and the files are those of an uninterrupted
// export, byte for byte.
func TestRetriedExportStartsOver(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	d, v := frozenPairs(t, e)
	ex, _, err := e.svc.StartExport(ctx, e.actor, e.org, d.ID, datasets.ExportRequest{Format: "trl_preference", MaskPII: true})
	if err != nil {
		t.Fatal(err)
	}
	prefix := datasets.ExportPrefix(ex)
	for key, body := range map[string]string{
		prefix + "train.jsonl.18a2b3c4d5e6f708.tmp": `{"prompt":`,
		prefix + "train.jsonl":                      "{}\n",
	} {
		if err := e.svc.Bucket.WriteAll(ctx, key, []byte(body), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.svc.RunExport(ctx, ex.ID); err != nil {
		t.Fatal(err)
	}
	keys := list(t, e.svc.Bucket, prefix)
	if strings.Join(keys, ",") != prefix+"manifest.json,"+prefix+"train.jsonl,"+prefix+"validation.jsonl" {
		t.Fatalf("the export's prefix holds %v", keys)
	}
	if _, err := datasets.WriteFiles(ctx, e.pool, e.svc.Bucket, e.svc.Scratch, "clean/", v, export.TRLPreference, true, nil); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"train.jsonl", "validation.jsonl", "manifest.json"} {
		if !bytes.Equal(read(t, e.svc.Bucket, prefix+name), read(t, e.svc.Bucket, "clean/"+name)) {
			t.Fatalf("%s differs from an uninterrupted export's", name)
		}
	}
}

// An export that fails while storing its files removes what it stored and
// its partial files.
func TestFailedStoreLeavesNothing(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	_, v := frozenPairs(t, e)
	dir := t.TempDir()
	bucket, err := blobstore.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	// A directory where the validation file goes: storing it fails after
	// the train file was stored.
	if err := os.MkdirAll(filepath.Join(dir, "x", "validation.jsonl", "in-the-way"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err = datasets.WriteFiles(ctx, e.pool, bucket, e.svc.Scratch, "x/", v, export.TRLPreference, true, nil)
	if err == nil || !strings.Contains(err.Error(), "storing validation.jsonl") {
		t.Fatalf("want a failure storing validation.jsonl, got %v", err)
	}
	if keys := list(t, bucket, "x/"); len(keys) != 0 {
		t.Fatalf("after the failure the prefix holds %v", keys)
	}
	if left := e.scratchFiles(t); len(left) != 0 {
		t.Fatalf("partial files left behind: %v", left)
	}
}

// An export given up after its worker died on the last attempt is failed
// with the reason and its prefix cleared; a finished export is left alone.
func TestAbandonExport(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	d, _ := frozenPairs(t, e)
	start := func() db.DatasetExport {
		ex, _, err := e.svc.StartExport(ctx, e.actor, e.org, d.ID, datasets.ExportRequest{Format: "trl_preference", MaskPII: true})
		if err != nil {
			t.Fatal(err)
		}
		return ex
	}
	dead, done := start(), start()
	if err := e.svc.RunExport(ctx, done.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Bucket.WriteAll(ctx, datasets.ExportPrefix(dead)+"train.jsonl.18a2b3c4d5e6f708.tmp", []byte("{"), nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uuid.UUID{dead.ID, done.ID, uuid.New()} {
		if err := e.svc.AbandonExport(ctx, id, "the worker stopped"); err != nil {
			t.Fatal(err)
		}
	}
	got, err := e.svc.Export(ctx, e.org, d.ID, dead.ID)
	if err != nil || got.Status != db.ExportStatusFailed || got.Error != "the worker stopped" {
		t.Fatalf("given-up export: %+v %v", got, err)
	}
	if keys := list(t, e.svc.Bucket, datasets.ExportPrefix(dead)); len(keys) != 0 {
		t.Fatalf("the given-up export's prefix holds %v", keys)
	}
	if got, _ := e.svc.Export(ctx, e.org, d.ID, done.ID); got.Status != db.ExportStatusSucceeded || len(list(t, e.svc.Bucket, datasets.ExportPrefix(done))) != 3 {
		t.Fatalf("the finished export was touched: %+v", got)
	}
}

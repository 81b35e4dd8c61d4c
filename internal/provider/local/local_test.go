package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/curate/curate/internal/provider"
)

// fakeTrainer is the path of the trainertest program, built once.
var fakeTrainer string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "trainertest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeTrainer = filepath.Join(dir, "trainertest")
	if out, err := exec.Command("go", "build", "-o", fakeTrainer, "./trainertest").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build trainertest: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fixture is a provider running the fake trainer in a temporary runs root,
// with a base model directory (named modelName in the models directory)
// and exported files.
type fixture struct {
	t     *testing.T
	cfg   Config
	p     *Provider
	model string // the base model's directory
	dir   string
}

// modelName names the fixture's base model in its models directory.
const modelName = "tiny-llama"

const testGrace = 300 * time.Millisecond

func newFixture(t *testing.T, mode string, edit ...func(*Config)) *fixture {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	must(t, err)
	model := filepath.Join(dir, "models", modelName)
	must(t, os.MkdirAll(model, 0o755))
	must(t, os.WriteFile(filepath.Join(model, "config.json"), []byte(`{"model_type":"llama"}`), 0o644))
	cfg := Config{
		RunsRoot:    filepath.Join(dir, "runs"),
		ModelsDir:   filepath.Join(dir, "models"),
		Command:     []string{fakeTrainer, "run"},
		Env:         []string{"FAKE_TRAINER_MODE=" + mode},
		CancelGrace: testGrace,
	}
	for _, e := range edit {
		e(&cfg)
	}
	p, err := New(cfg)
	must(t, err)
	// Before the directory goes, let the provider record its trainers' exits.
	t.Cleanup(func() {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			p.mu.Lock()
			n := len(p.reaping)
			p.mu.Unlock()
			if n == 0 {
				return
			}
		}
		t.Error("trainers still running at the end of the test")
	})
	return &fixture{t: t, cfg: cfg, p: p, model: model, dir: dir}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// export writes a two-line training file and a one-line evaluation file.
func (f *fixture) export(format string) (train, valid string) {
	line := `{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello"}]}`
	if format == "trl_preference" {
		line = `{"prompt":[{"role":"user","content":"Hi"}],"chosen":[{"role":"assistant","content":"Hello"}],"rejected":[{"role":"assistant","content":"Go away"}]}`
	}
	train = filepath.Join(f.dir, "export-train.jsonl")
	valid = filepath.Join(f.dir, "export-valid.jsonl")
	must(f.t, os.WriteFile(train, []byte(line+"\n"+line+"\n"), 0o644))
	must(f.t, os.WriteFile(valid, []byte(line+"\n"), 0o644))
	return train, valid
}

func (f *fixture) request(id string, method provider.Method, format string) provider.CreateRequest {
	f.t.Helper()
	ctx := context.Background()
	train, valid := f.export(format)
	up, err := f.p.Upload(ctx, provider.UploadRequest{CurateJobID: id, TrainPath: train, ValidPath: valid, Format: format})
	must(f.t, err)
	ready, err := f.p.WaitUploaded(ctx, up)
	must(f.t, err)
	if !ready {
		f.t.Fatal("WaitUploaded: not ready after Upload")
	}
	return provider.CreateRequest{CurateJobID: id, BaseModel: modelName, Method: method, TrainFileID: up.TrainFileID, ValidFileID: up.ValidFileID}
}

// start uploads and creates a job the way a worker does, and kills what is
// left of its trainer when the test ends.
func (f *fixture) start(id string, method provider.Method, format string) provider.Job {
	f.t.Helper()
	req := f.request(id, method, format)
	if _, found, err := f.p.FindJob(context.Background(), id); err != nil || found {
		f.t.Fatalf("FindJob before Create = found %v, err %v; want not found", found, err)
	}
	job, err := f.p.Create(context.Background(), req)
	must(f.t, err)
	f.t.Cleanup(func() { f.kill(job.ID) })
	return job
}

func (f *fixture) runDir(jobID string) string { return filepath.Join(f.cfg.RunsRoot, jobID) }

func (f *fixture) pid(jobID string) pidRecord {
	f.t.Helper()
	var rec pidRecord
	must(f.t, readJSON(filepath.Join(f.runDir(jobID), pidFile), &rec))
	return rec
}

func (f *fixture) kill(jobID string) {
	var rec pidRecord
	if readJSON(filepath.Join(f.runDir(jobID), pidFile), &rec) == nil {
		_ = signalGroup(rec, syscall.SIGKILL)
	}
}

// waitFile waits for a file the fake trainer writes.
func (f *fixture) waitFile(path string) []byte {
	f.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return b
		}
	}
	f.t.Fatalf("%s did not appear", path)
	return nil
}

// waitText waits until the file at path holds text.
func (f *fixture) waitText(path, text string) {
	f.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), text) {
			return
		}
	}
	f.t.Fatalf("%s does not say %q", path, text)
}

// finished is what polling a job to its end saw.
type finished struct {
	status      provider.Status
	events      []provider.Event
	checkpoints []provider.Checkpoint
	records     []provider.Record
	polls       int
}

// pollToEnd polls as a worker does until the job is terminal, checking
// that events come once each, in file order.
func pollToEnd(t *testing.T, p *Provider, jobID string) finished {
	t.Helper()
	var got finished
	var cursor provider.EventCursor
	last, lastRecord := int64(-1), int64(-1)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		res, err := p.Poll(context.Background(), jobID, cursor)
		must(t, err)
		got.polls++
		for _, e := range res.Events {
			off, err := strconv.ParseInt(e.ID, 10, 64)
			if err != nil || off <= last {
				t.Fatalf("event id %q after %d: ids must be increasing offsets", e.ID, last)
			}
			last = off
		}
		for _, r := range res.Records {
			if r.Offset <= lastRecord {
				t.Fatalf("record at %d after %d: offsets must increase", r.Offset, lastRecord)
			}
			lastRecord = r.Offset
		}
		got.records = append(got.records, res.Records...)
		got.events = append(got.events, res.Events...)
		got.status, got.checkpoints, cursor = res.Status, res.Checkpoints, res.Cursor
		if res.Status.State.Terminal() {
			return got
		}
	}
	t.Fatalf("job %s did not end; last status %+v", jobID, got.status)
	return got
}

func messages(events []provider.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Message)
	}
	return out
}

func containsMessage(events []provider.Event, level, msg string) bool {
	for _, e := range events {
		if e.Level == level && e.Message == msg {
			return true
		}
	}
	return false
}

// gone reports whether a process has exited (a zombie waiting for its
// parent counts as exited).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] == "Z"
}

func float(v float64) *float64 { return &v }

func TestErrSlotsBusyIsNotPermanent(t *testing.T) {
	err := fail("take GPU slot", false, ErrSlotsBusy)
	if provider.IsPermanent(err) || !errors.Is(err, ErrSlotsBusy) {
		t.Fatalf("slot error %v: permanent %v, is ErrSlotsBusy %v", err, provider.IsPermanent(err), errors.Is(err, ErrSlotsBusy))
	}
}

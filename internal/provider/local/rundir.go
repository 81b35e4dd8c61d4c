package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/curate/curate/internal/provider"
)

// The files of a run directory (see the package comment).
const (
	configFile  = "config.json"
	trainFile   = "train.jsonl"
	evalFile    = "eval.jsonl"
	uploadFile  = "upload.json"
	pidFile     = "trainer.pid"
	lockFile    = "run.lock"
	eventsFile  = "events.jsonl"
	metricsFile = "metrics.jsonl" // the trainer's own record of its metrics
	stderrFile  = "stderr.log"
	exitFile    = "exit.json"
	cancelFile  = "cancel.json"
	outcomeFile = "outcome.json"
	slotsDir    = ".slots"
	runPrefix   = "train_"
)

// formats are the export formats the trainer reads: chat examples and
// TRL's conversational preference pairs.
var formats = []string{"openai_chat", "trl_preference"}

// run is one run directory.
type run struct {
	id  string // the provider job id, "train_<curate job id>"
	dir string
}

func (p *Provider) run(curateJobID string) run {
	id := runPrefix + curateJobID
	return run{id: id, dir: filepath.Join(p.cfg.RunsRoot, id)}
}

// runOf returns the run of a provider job id, refusing ids that are not
// one (and so could point outside the runs root).
func (p *Provider) runOf(jobID string) (run, error) {
	curateID, ok := strings.CutPrefix(jobID, runPrefix)
	if !ok || provider.CheckCurateJobID(curateID) != nil {
		return run{}, fail("find job", true, fmt.Errorf("%q is not a local job id", jobID))
	}
	r := p.run(curateID)
	if _, err := os.Stat(r.dir); err != nil {
		return run{}, fail("find job", errors.Is(err, fs.ErrNotExist), fmt.Errorf("run directory of %s: %w", jobID, err))
	}
	return r, nil
}

func (r run) path(name string) string { return filepath.Join(r.dir, name) }

// uploadRecord notes what Upload copied.
type uploadRecord struct {
	Format string `json:"format"`
}

// pidRecord identifies the trainer process. The kernel start time tells
// the trainer apart from a later process that got the same pid.
type pidRecord struct {
	PID        int       `json:"pid"`
	StartTicks uint64    `json:"start_ticks"`
	Slot       int       `json:"slot"`
	StartedAt  time.Time `json:"started_at"`
}

// exitRecord is how the trainer ended, as its parent saw it.
type exitRecord struct {
	Status string `json:"status"` // e.g. "exit status 3" or "signal: killed"
	Code   int    `json:"code"`   // -1 when ended by a signal
}

// cancelRecord marks a cancelled job.
type cancelRecord struct {
	At time.Time `json:"at"`
}

// outcome is how the job ended. SeenAt is when it became known, so that a
// trainer that reports its end but does not exit can be stopped.
type outcome struct {
	State  provider.State `json:"state"`
	Error  string         `json:"error,omitempty"`
	Model  string         `json:"model,omitempty"`
	SeenAt time.Time      `json:"seen_at"`
}

func (r run) readUpload() (uploadRecord, error) {
	var u uploadRecord
	return u, readJSON(r.path(uploadFile), &u)
}

// readJSON reads a small state file; fs.ErrNotExist when it is absent.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// writeJSON replaces a state file whole: written aside, then renamed, so
// a reader never sees half of it.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(path, b)
}

func writeFile(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o640); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// Upload copies the files into the job's run directory. The exported files
// stay where they are; a run that has started keeps the files it has.
func (p *Provider) Upload(ctx context.Context, req provider.UploadRequest) (provider.UploadResult, error) {
	if err := req.Check(p.cfg.MaxFileBytes, formats...); err != nil {
		return provider.UploadResult{}, err
	}
	r := p.run(req.CurateJobID)
	res := provider.UploadResult{TrainFileID: r.path(trainFile)}
	if req.ValidPath != "" {
		res.ValidFileID = r.path(evalFile)
	}
	if _, err := os.Stat(r.path(pidFile)); err == nil {
		return res, nil
	}
	if err := os.MkdirAll(r.dir, 0o750); err != nil {
		return provider.UploadResult{}, fail("make run directory", false, err)
	}
	if err := copyFile(ctx, req.TrainPath, res.TrainFileID); err != nil {
		return provider.UploadResult{}, fail("copy training file", false, err)
	}
	if req.ValidPath != "" {
		if err := copyFile(ctx, req.ValidPath, res.ValidFileID); err != nil {
			return provider.UploadResult{}, fail("copy evaluation file", false, err)
		}
	} else if err := os.Remove(r.path(evalFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return provider.UploadResult{}, fail("remove old evaluation file", false, err)
	}
	if err := writeJSON(r.path(uploadFile), uploadRecord{Format: req.Format}); err != nil {
		return provider.UploadResult{}, fail("record upload", false, err)
	}
	return res, nil
}

// copyFile copies src to dst through a temporary file, so dst is either
// the whole copy or absent (a full disk leaves no half file behind).
func copyFile(ctx context.Context, src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, ctxReader{ctx, in})
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, dst)
}

// ctxReader stops a long copy when the context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}

// WaitUploaded reports whether the copied files are in place; a copy is
// ready as soon as Upload returns.
func (p *Provider) WaitUploaded(ctx context.Context, files provider.UploadResult) (bool, error) {
	for _, path := range []string{files.TrainFileID, files.ValidFileID} {
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); err != nil {
			return false, fail("check upload", true, err)
		}
	}
	return true, nil
}

// logTailBytes is how much of the end of the trainer's stderr a failure
// message quotes.
const logTailBytes = 2 << 10

// logTail returns the last logTailBytes of the trainer's stderr, starting
// at a line (and never inside a UTF-8 character). Only the tail is read,
// however large the log has grown.
func (r run) logTail() string {
	f, err := os.Open(r.path(stderrFile))
	if err != nil {
		return ""
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return ""
	}
	start := max(info.Size()-logTailBytes, 0)
	b := make([]byte, info.Size()-start)
	n, _ := f.ReadAt(b, start)
	b = b[:n]
	if start > 0 {
		if i := strings.IndexByte(string(b), '\n'); i >= 0 && i < len(b)-1 {
			b = b[i+1:]
		}
		for len(b) > 0 && !utf8.RuneStart(b[0]) {
			b = b[1:]
		}
	}
	return strings.ToValidUTF8(strings.TrimSpace(string(b)), "\uFFFD")
}

package local

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/curate/curate/internal/provider"
)

// Bounds on one Poll, so a trainer that prints a flood still gets a quick
// answer; the rest comes with the next Poll.
const (
	maxPollBytes    = 4 << 20 // read from events.jsonl
	maxPollEvents   = 1000
	maxMessageBytes = 2 << 10 // kept of one line
)

// trainerEvent is one protocol line (trainer/README.md, "Events on stdout").
type trainerEvent struct {
	Event                  string   `json:"event"`
	Phase                  string   `json:"phase"`
	Step                   *int     `json:"step"`
	TotalSteps             *int     `json:"total_steps"`
	Epoch                  *int     `json:"epoch"`
	Iter                   *int     `json:"iter"`
	Loss                   *float64 `json:"loss"`
	EvalLoss               *float64 `json:"eval_loss"`
	Accuracy               *float64 `json:"accuracy"`
	PreferenceAccuracy     *float64 `json:"preference_accuracy"`
	EvalPreferenceAccuracy *float64 `json:"eval_preference_accuracy"`
	RankingAccuracy        *float64 `json:"ranking_accuracy"`
	Path                   string   `json:"path"`
	Kind                   string   `json:"kind"`
	Message                string   `json:"message"`
	Reason                 string   `json:"reason"`
}

var eventNames = []string{"progress", "metric", "artifact", "stop", "done", "error"}

// parseEvent reads a protocol event; ok is false for anything else, which
// is log text.
func parseEvent(line []byte) (ev trainerEvent, ok bool) {
	if json.Unmarshal(line, &ev) != nil || !slices.Contains(eventNames, ev.Event) {
		return trainerEvent{}, false
	}
	return ev, true
}

// stepMetric is a metric event's training curve values; nil when it has
// none (an IRS iteration summary, for one).
func (ev trainerEvent) stepMetric() *provider.StepMetric {
	m := provider.StepMetric{TrainLoss: ev.Loss, ValidLoss: ev.EvalLoss, TrainAccuracy: ev.Accuracy}
	if m.TrainAccuracy == nil {
		m.TrainAccuracy = ev.PreferenceAccuracy
	}
	if m.TrainLoss == nil && m.ValidLoss == nil && m.TrainAccuracy == nil || ev.Step == nil {
		return nil
	}
	m.Step = *ev.Step
	if ev.Epoch != nil {
		m.Epoch = *ev.Epoch
	}
	return &m
}

// window is what one Poll read from events.jsonl.
type window struct {
	events   []provider.Event
	progress provider.Progress
	phase    string   // the last phase reported, carried in the cursor
	model    string   // the last final artifact, absolute
	end      *outcome // set by a done or error event
	next     int64    // offset after the last line handled
	caughtUp bool     // nothing is left to read
}

// read handles the lines from offset `from`, at most maxPollBytes of
// them, holding one line (of at most maxScanLine bytes) in memory. final
// says the trainer has exited, so a last line without its newline is
// complete.
func (r run) read(from int64, phase string, final bool) (window, error) {
	w := window{phase: phase, next: from}
	f, err := os.Open(r.path(eventsFile))
	if errors.Is(err, fs.ErrNotExist) {
		w.caughtUp = true
		return w, nil
	}
	if err != nil {
		return w, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return w, err
	}
	size := info.Size()
	if from > size {
		return w, fmt.Errorf("cursor %d lies beyond the end of events.jsonl (%d bytes)", from, size)
	}
	limit := min(size-from, maxPollBytes)
	br := bufio.NewReaderSize(io.NewSectionReader(f, from, limit), 64<<10)
	now := time.Now().UTC()
	var pos int64
	var line []byte
	for len(w.events) < maxPollEvents {
		n, complete, err := readLine(br, &line)
		if err != nil {
			return w, err
		}
		if n == 0 {
			break
		}
		if !complete {
			// A line still being written waits for the next Poll, unless
			// the trainer has exited or the line is longer than a whole
			// read (log text in any case).
			lastOfExited := final && from+pos+n == size
			overlong := pos == 0 && n == maxPollBytes
			if !lastOfExited && !overlong {
				break
			}
		}
		r.handle(&w, strconv.FormatInt(from+pos, 10), now, line)
		pos += n
	}
	w.next = from + pos
	w.caughtUp = w.next == size
	return w, nil
}

// readLine reads one line into *line (without its newline, cut at
// maxScanLine bytes) and returns the bytes it spans and whether it ended
// with a newline.
func readLine(br *bufio.Reader, line *[]byte) (n int64, complete bool, err error) {
	*line = (*line)[:0]
	for {
		chunk, err := br.ReadSlice('\n')
		n += int64(len(chunk))
		keep := chunk[:min(len(chunk), max(maxScanLine-len(*line), 0))]
		*line = append(*line, keep...)
		switch err {
		case nil:
			*line = bytes.TrimSuffix(*line, []byte("\n"))
			return n, true, nil
		case bufio.ErrBufferFull:
			continue
		case io.EOF:
			return n, false, nil
		default:
			return n, false, err
		}
	}
}

// handle turns one line into events, progress and the outcome.
func (r run) handle(w *window, id string, at time.Time, line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	add := func(level, msg string, m *provider.StepMetric) {
		w.events = append(w.events, provider.Event{ID: id, At: at, Level: level, Message: msg, Metric: m})
	}
	ev, ok := parseEvent(line)
	if !ok {
		add("info", clip(line), nil)
		return
	}
	switch ev.Event {
	case "progress":
		if ev.Step != nil {
			w.progress.Step = *ev.Step
		}
		if ev.TotalSteps != nil {
			w.progress.TotalSteps = *ev.TotalSteps
		}
		if ev.Epoch != nil {
			w.progress.Epoch = *ev.Epoch
		}
		// Progress comes every step; only a new phase is worth an event.
		if ev.Phase != "" && ev.Phase != w.phase {
			msg := "phase " + ev.Phase
			if ev.Iter != nil {
				msg += fmt.Sprintf(" (iteration %d)", *ev.Iter)
			}
			add("info", msg, nil)
			w.phase = ev.Phase
		}
	case "metric":
		m := ev.stepMetric()
		if m != nil {
			w.progress.Step = m.Step
			if m.Epoch != 0 {
				w.progress.Epoch = m.Epoch
			}
		}
		add("info", clip(line), m)
	case "artifact":
		add("info", fmt.Sprintf("saved %s at %s", ev.Kind, ev.Path), nil)
		if ev.Kind != "checkpoint" && ev.Path != "" {
			w.model = r.resolve(ev.Path)
		}
	case "stop":
		// The run ends early on purpose and still saves its model: a
		// warning the page shows, not a failure.
		msg := "stopped early"
		if ev.Step != nil {
			msg += fmt.Sprintf(" at step %d", *ev.Step)
		}
		add("warn", clip([]byte(msg+": "+ev.Reason)), nil)
	case "done":
		add("info", "done", nil)
		w.end = &outcome{State: provider.StateSucceeded}
	case "error":
		add("error", ev.Message, nil)
		w.end = &outcome{State: provider.StateFailed, Error: ev.Message}
		if ev.Message == "cancelled" {
			w.end.State = provider.StateCancelled
		}
	}
}

// resolve makes an artifact path absolute: the trainer gives paths
// relative to the run directory.
func (r run) resolve(path string) string {
	if filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	return filepath.Join(r.dir, path)
}

// clip keeps the start of an overlong line, as valid UTF-8.
func clip(line []byte) string {
	s := string(line)
	if len(s) > maxMessageBytes {
		s = s[:maxMessageBytes] + " …"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// localCursor is where a Poll stopped reading: the offset in events.jsonl,
// the phase last reported, and the offset in metrics.jsonl.
type localCursor struct {
	events  int64
	phase   string
	metrics int64
}

// parseCursor reads "<offset>", "<offset>:<phase>" or
// "<offset>:<phase>:<metrics offset>".
func parseCursor(c provider.EventCursor) (localCursor, error) {
	var lc localCursor
	if c == "" {
		return lc, nil
	}
	bad := fail("poll job", true, fmt.Errorf("%q is not a local event cursor", c))
	num, rest, _ := strings.Cut(string(c), ":")
	phase, metrics, hasMetrics := strings.Cut(rest, ":")
	var err error
	if lc.events, err = strconv.ParseInt(num, 10, 64); err != nil || lc.events < 0 {
		return lc, bad
	}
	lc.phase = phase
	if hasMetrics {
		if lc.metrics, err = strconv.ParseInt(metrics, 10, 64); err != nil || lc.metrics < 0 {
			return lc, bad
		}
	}
	return lc, nil
}

func (lc localCursor) String() string {
	s := strconv.FormatInt(lc.events, 10)
	if lc.phase != "" || lc.metrics > 0 {
		s += ":" + lc.phase
	}
	if lc.metrics > 0 {
		s += ":" + strconv.FormatInt(lc.metrics, 10)
	}
	return s
}

// readMetrics returns the lines of metrics.jsonl from offset `from`, at
// most maxPollBytes and maxPollEvents of them, and the offset after the
// last line read. A line still being written waits for the next read
// unless the trainer has exited (final). Lines that are not JSON objects
// in UTF-8 are skipped.
func (r run) readMetrics(from int64, final bool) (recs []provider.Record, next int64, caughtUp bool, err error) {
	f, err := os.Open(r.path(metricsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, from, true, nil
	}
	if err != nil {
		return nil, from, false, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, from, false, err
	}
	size := info.Size()
	if from > size {
		return nil, from, false, fmt.Errorf("cursor %d lies beyond the end of metrics.jsonl (%d bytes)", from, size)
	}
	br := bufio.NewReaderSize(io.NewSectionReader(f, from, min(size-from, maxPollBytes)), 64<<10)
	var pos int64
	var line []byte
	for len(recs) < maxPollEvents {
		n, complete, err := readLine(br, &line)
		if err != nil {
			return nil, from, false, err
		}
		if n == 0 || !complete && !(final && from+pos+n == size) {
			break
		}
		if l := bytes.TrimSpace(line); len(l) > 0 && l[0] == '{' && utf8.Valid(l) && json.Valid(l) {
			recs = append(recs, provider.Record{Offset: from + pos, Line: json.RawMessage(bytes.Clone(l))})
		}
		pos += n
	}
	return recs, from + pos, from+pos == size, nil
}

// Poll reads the trainer's events after the cursor and settles the job's
// outcome: done or an error event ends it, and so does a trainer that
// exited without either (failed, quoting the end of its stderr).
func (p *Provider) Poll(ctx context.Context, jobID string, since provider.EventCursor) (provider.PollResult, error) {
	r, err := p.runOf(jobID)
	if err != nil {
		return provider.PollResult{}, err
	}
	lc, err := parseCursor(since)
	if err != nil {
		return provider.PollResult{}, err
	}
	// Liveness first: once the trainer is seen gone, all it wrote is on disk.
	alive, err := r.alive()
	if err != nil {
		return provider.PollResult{}, fail("poll job", false, err)
	}
	var rec pidRecord
	if err := readJSON(r.path(pidFile), &rec); err != nil && !alive {
		return provider.PollResult{}, fail("poll job", errors.Is(err, fs.ErrNotExist), fmt.Errorf("no trainer was started for %s: %w", jobID, err))
	}
	// A trainer this process started is not over until its exit status is kept.
	alive = alive || p.isReaping(r)
	w, err := r.read(lc.events, lc.phase, !alive)
	if err != nil {
		return provider.PollResult{}, fail("poll job", false, err)
	}
	// After the events: a metric the trainer reported before exiting is
	// in metrics.jsonl by the time its exit is seen.
	recs, metricsNext, metricsDone, err := r.readMetrics(lc.metrics, !alive)
	if err != nil {
		return provider.PollResult{}, fail("read metrics.jsonl", false, err)
	}
	out, err := p.settle(ctx, r, w, alive)
	if err != nil {
		return provider.PollResult{}, err
	}
	st, err := p.statusOf(r, rec, out, alive)
	if err != nil {
		return provider.PollResult{}, err
	}
	st.Progress = w.progress
	if st.ProviderState == "running" && w.phase != "" {
		st.ProviderState = w.phase
	}
	var cfg trainerConfig
	if readJSON(r.path(configFile), &cfg) == nil && cfg.Method != "irs" {
		st.Progress.TotalEpochs = max(defaultEpochs[cfg.Method], 1)
		if e, ok := cfg.Hyperparameters["epochs"].(float64); ok {
			st.Progress.TotalEpochs = int(e)
		}
	}
	if st.State.Terminal() && !metricsDone {
		// The job is over only once its whole metrics log has been read.
		st = provider.Status{State: provider.StateRunning, ProviderState: "finishing", Progress: st.Progress}
	}
	cps, err := r.checkpoints()
	if err != nil {
		return provider.PollResult{}, fail("list checkpoints", false, err)
	}
	return provider.PollResult{Status: st, Events: w.events, Checkpoints: cps, Records: recs,
		Cursor: provider.EventCursor(localCursor{events: w.next, phase: w.phase, metrics: metricsNext}.String())}, nil
}

// settle returns the job's outcome, recording it the first time it is
// known; nil while the job runs.
func (p *Provider) settle(ctx context.Context, r run, w window, alive bool) (*outcome, error) {
	var out outcome
	err := readJSON(r.path(outcomeFile), &out)
	if err == nil {
		return &out, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fail("read outcome", false, err)
	}
	switch {
	case w.end != nil:
		out = *w.end
		if out.State == provider.StateSucceeded {
			out.Model = w.model
			if out.Model == "" {
				// The artifact came in an earlier Poll's lines.
				if out.Model, err = r.lastArtifact(ctx); err != nil {
					return nil, fail("find the trained model", false, err)
				}
			}
			if out.Model == "" {
				out = outcome{State: provider.StateFailed, Error: "the trainer reported done without saving a model"}
			}
		}
	case !alive && w.caughtUp:
		out = r.death()
	default:
		return nil, nil
	}
	out.SeenAt = time.Now().UTC()
	if err := writeJSON(r.path(outcomeFile), out); err != nil {
		return nil, fail("record outcome", false, err)
	}
	return &out, nil
}

// death is the outcome of a trainer that exited without done or error.
func (r run) death() outcome {
	var c cancelRecord
	if readJSON(r.path(cancelFile), &c) == nil {
		return outcome{State: provider.StateCancelled, Error: "cancelled"}
	}
	msg := "the trainer exited without reporting done or an error"
	var ex exitRecord
	if readJSON(r.path(exitFile), &ex) == nil {
		msg += " (" + ex.Status + ")"
	}
	if tail := r.logTail(); tail != "" {
		msg += "; the end of stderr.log:\n" + tail
	}
	return outcome{State: provider.StateFailed, Error: msg}
}

// status is a job's state without reading its events: the recorded
// outcome, or running until a Poll settles it.
func (p *Provider) status(r run) (provider.Status, error) {
	alive, err := r.alive()
	if err != nil {
		return provider.Status{}, fail("read job", false, err)
	}
	var out outcome
	if err := readJSON(r.path(outcomeFile), &out); err != nil {
		return provider.Status{State: provider.StateRunning, ProviderState: "running"}, nil
	}
	var rec pidRecord
	_ = readJSON(r.path(pidFile), &rec)
	return p.statusOf(r, rec, &out, alive || p.isReaping(r))
}

// statusOf turns an outcome into a status. A trainer that has reported its
// end but not exited gets the grace period, then its group is killed; so
// does one that outlives a cancel by the grace period (after a restart
// cut Cancel short).
func (p *Provider) statusOf(r run, rec pidRecord, out *outcome, alive bool) (provider.Status, error) {
	running := provider.Status{State: provider.StateRunning, ProviderState: "running"}
	overdue := func(since time.Time) bool { return alive && !since.IsZero() && time.Since(since) > p.cfg.CancelGrace }
	if out == nil {
		var c cancelRecord
		if readJSON(r.path(cancelFile), &c) == nil && overdue(c.At.Add(p.cfg.CancelGrace)) {
			if err := signalGroup(rec, syscall.SIGKILL); err != nil {
				return provider.Status{}, fail("stop trainer", false, err)
			}
		}
		return running, nil
	}
	if alive {
		if overdue(out.SeenAt) {
			if err := signalGroup(rec, syscall.SIGKILL); err != nil {
				return provider.Status{}, fail("stop trainer", false, err)
			}
		}
		running.ProviderState = "finishing"
		return running, nil
	}
	return provider.Status{State: out.State, ProviderState: string(out.State), Error: out.Error, FineTunedModel: out.Model}, nil
}

// checkpoints lists checkpoints/step_N and checkpoints/iter_N, steps
// first, each in order.
func (r run) checkpoints() ([]provider.Checkpoint, error) {
	entries, err := os.ReadDir(r.path("checkpoints"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []provider.Checkpoint
	for _, e := range entries {
		kind, num, ok := strings.Cut(e.Name(), "_")
		n, err := strconv.Atoi(num)
		if !e.IsDir() || !ok || err != nil || (kind != "step" && kind != "iter") {
			continue
		}
		c := provider.Checkpoint{ID: e.Name(), Model: r.path(filepath.Join("checkpoints", e.Name()))}
		if kind == "step" {
			c.Step, c.Metrics.Step = n, n
		}
		if info, err := e.Info(); err == nil {
			c.At = info.ModTime().UTC()
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b provider.Checkpoint) int {
		ka, na, _ := strings.Cut(a.ID, "_")
		kb, nb, _ := strings.Cut(b.ID, "_")
		if ka != kb {
			return -strings.Compare(ka, kb) // "step" before "iter"
		}
		x, _ := strconv.Atoi(na)
		y, _ := strconv.Atoi(nb)
		return x - y
	})
	return out, nil
}

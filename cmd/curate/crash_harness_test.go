package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/chat/chattest"
)

// What the kill tests share: the real binary built once per test, the
// environment every process of a test is started with, its API key, and
// JSON calls to whichever process is running now.

// buildCurate builds the binary under test into the test's temporary
// folder.
func buildCurate(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "curate")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// crashWorld is a database, a data folder and the binary that a test
// starts, kills and starts again.
type crashWorld struct {
	t    *testing.T
	bin  string
	env  []string
	pool *pgxpool.Pool
	key  string // an admin's API key, once apiKey made it
	proc *curateProcess
}

// newCrashWorld builds the binary and gives it a fresh database, data
// folder and TMPDIR; extra are more VAR=value settings.
func newCrashWorld(t *testing.T, extra ...string) *crashWorld {
	t.Helper()
	bin := buildCurate(t)
	pool, dbURL := pgtest.NewDBURL(t)
	env := append([]string{
		"PATH=" + os.Getenv("PATH"), "TMPDIR=" + t.TempDir(),
		"DATABASE_URL=" + dbURL, "CURATE_DATA_DIR=" + t.TempDir(), "CURATE_ADDR=127.0.0.1:0", "CURATE_METRICS_ADDR=off",
		"CURATE_SESSION_KEY=crash-test-session-key-0123456789abcdef", "CURATE_SECRET_KEY=crash-test-secret-key-0123456789abcdef",
		"CURATE_OUTBOUND_ALLOW=127.0.0.0/8,::1",
	}, extra...)
	return &crashWorld{t: t, bin: bin, env: env, pool: pool}
}

// cli runs `curate args...` to its end and returns its output.
func (w *crashWorld) cli(args ...string) string {
	w.t.Helper()
	cmd := exec.Command(w.bin, args...)
	cmd.Env = w.env
	out, err := cmd.Output()
	if err != nil {
		w.t.Fatalf("curate %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// apiKey makes an admin key of the organisation and keeps it for call.
func (w *crashWorld) apiKey(org string) string {
	w.t.Helper()
	w.key = regexp.MustCompile(`cur_[a-z0-9]+_[a-z0-9]+`).FindString(w.cli("apikey", "create", "--org", org, "--name", "crash test", "--role", "admin"))
	if w.key == "" {
		w.t.Fatal("apikey create printed no key")
	}
	return w.key
}

// start starts `curate serve` and returns once it listens: the moment a
// restart's deadlines count from.
func (w *crashWorld) start() time.Time {
	w.t.Helper()
	w.proc = startCurate(w.t, w.bin, w.env)
	return time.Now()
}

// call sends a JSON request to the running process with the admin key and
// decodes the answer, which must have one of the statuses in want (any
// below 300 when want is empty). header is pairs of names and values.
func (w *crashWorld) call(method, path string, body any, want []int, header ...string) map[string]any {
	w.t.Helper()
	var rd io.Reader = http.NoBody
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			w.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, w.proc.url+path, rd)
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+w.key)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var got map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&got)
	ok := len(want) == 0 && resp.StatusCode < 300
	for _, s := range want {
		ok = ok || resp.StatusCode == s
	}
	if !ok {
		w.t.Fatalf("%s %s: %d %v, want %v", method, path, resp.StatusCode, got, want)
	}
	return got
}

// get is call's GET answering 200.
func (w *crashWorld) get(path string) map[string]any {
	w.t.Helper()
	return w.call(http.MethodGet, path, nil, []int{http.StatusOK})
}

// post is call's POST answering below 300.
func (w *crashWorld) post(path string, body any) map[string]any {
	w.t.Helper()
	return w.call(http.MethodPost, path, body, nil)
}

// heldJudge is a judge stand-in that answers until it is told to hold:
// from then on every call waits, unanswered, until the process that made
// it is gone (so a kill never falls between an answer given and an answer
// stored), and answers again once released. It counts the answers it gave
// to each question: a question answered twice is a second charge.
type heldJudge struct {
	*chattest.Server
	mu       sync.Mutex
	answered map[string]int
	total    int
	holding  bool
	// inFlight are the calls being answered now (not held).
	inFlight atomic.Int64
	held     atomic.Int64
	// holdAfter, when above zero, makes the judge hold by itself once it
	// has given that many answers.
	holdAfter int
}

// newHeldJudge starts a judge answering with reply; pass, when it says
// so, answers a request at once and counts nothing (a candidate served by
// the same stand-in).
func newHeldJudge(t *testing.T, reply func(chattest.Request) chattest.Reply, pass func(chattest.Request) bool) *heldJudge {
	j := &heldJudge{answered: map[string]int{}}
	j.Server = chattest.New(func(r chattest.Request) chattest.Reply {
		if pass != nil && pass(r) {
			return reply(r)
		}
		j.mu.Lock()
		if j.holding {
			j.mu.Unlock()
			j.held.Add(1)
			return chattest.Reply{Hang: true}
		}
		j.inFlight.Add(1)
		defer j.inFlight.Add(-1)
		j.answered[r.Last()]++
		if j.total++; j.holdAfter > 0 && j.total == j.holdAfter {
			j.holding = true
		}
		j.mu.Unlock()
		return reply(r)
	})
	t.Cleanup(j.Close)
	return j
}

// hold makes every call from now on wait unanswered, and returns once no
// call is being answered.
func (j *heldJudge) hold() {
	j.mu.Lock()
	j.holding = true
	j.mu.Unlock()
	for j.inFlight.Load() > 0 {
		time.Sleep(5 * time.Millisecond)
	}
}

// holdAt makes the judge hold once it has given n answers in all (at once
// when it has given that many).
func (j *heldJudge) holdAt(n int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.total >= n {
		j.holding = true
		return
	}
	j.holdAfter = n
}

// release answers calls again.
func (j *heldJudge) release() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.holding, j.holdAfter = false, 0
}

// answers is how many answers the judge gave.
func (j *heldJudge) answers() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.total
}

// twice lists the questions answered more than once, and how many
// distinct questions were answered.
func (j *heldJudge) twice() (questions int, repeated []string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for q, n := range j.answered {
		if n != 1 {
			repeated = append(repeated, q)
		}
	}
	return len(j.answered), repeated
}

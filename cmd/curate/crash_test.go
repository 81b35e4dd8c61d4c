package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/export"
)

// crashPairs is the size of the export killed mid-way: 50,000 pairs, as
// CI runs it. Elsewhere CURATE_CRASH_PAIRS may make it smaller.
func crashPairs(t *testing.T) int {
	n := 50000
	if v := os.Getenv("CURATE_CRASH_PAIRS"); v != "" && os.Getenv("CI") != "true" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1000 {
			t.Fatalf("CURATE_CRASH_PAIRS=%q: want a number of at least 1000", v)
		}
	}
	return n
}

// The real binary is killed with SIGKILL in the middle of an export of
// 50,000 pairs. The export stays "running"; once the binary is started
// again on the same data directory and database, the killed process's
// partial files are gone at once and the export finishes within
// resumeWithin of the restart, its files byte for byte those of an export
// of the same version
// that nothing interrupted. Nothing is left in the data directory's
// scratch or in the processes' TMPDIR.
func TestExportSurvivesKill(t *testing.T) {
	ctx := context.Background()
	pairs := crashPairs(t)
	bin := buildCurate(t)
	pool, dbURL := pgtest.NewDBURL(t)
	dataDir, procTmp := t.TempDir(), t.TempDir()
	env := []string{
		"PATH=" + os.Getenv("PATH"), "TMPDIR=" + procTmp,
		"DATABASE_URL=" + dbURL, "CURATE_DATA_DIR=" + dataDir, "CURATE_ADDR=127.0.0.1:0", "CURATE_METRICS_ADDR=off",
		"CURATE_SESSION_KEY=crash-test-session-key-0123456789abcdef", "CURATE_SECRET_KEY=crash-test-secret-key-0123456789abcdef",
	}
	curate := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("curate %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	org, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	datasetID := curatingDataset(t, pool, org.ID, pairs)
	curate("dataset", "freeze", datasetID.String())
	key := regexp.MustCompile(`cur_[a-z0-9]+_[a-z0-9]+`).FindString(curate("apikey", "create", "--org", "acme", "--name", "crash test", "--role", "admin"))

	first := startCurate(t, bin, env)
	api := &apiClient{t: t, key: key, base: first.url, dataset: datasetID}
	killed := api.startExport()

	// Kill the process once the export has written rows of its files.
	var partial []string
	deadline := time.Now().Add(underwayWithin)
	for {
		e := api.export(killed)
		if e.Status == "succeeded" || e.Status == "failed" {
			t.Fatalf("the export ended (%s %s) before it could be killed; CURATE_CRASH_PAIRS too small?", e.Status, e.Error)
		}
		if partial = scratchFiles(t, dataDir); e.Status == "running" && e.RowsDone > 0 && len(partial) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the export did not start writing: %+v\n%s", e, first.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, p := range partial {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm() != 0o600 {
			t.Errorf("partial file %s has mode %v, want 0600", p, fi.Mode().Perm())
		}
	}
	first.kill()
	var status string
	if err := pool.QueryRow(ctx, "SELECT status::text FROM dataset_exports WHERE id = $1", killed).Scan(&status); err != nil || status != "running" {
		t.Fatalf("after the kill the export is %q (%v), want running", status, err)
	}

	second := startCurate(t, bin, env)
	restarted := time.Now()
	for _, p := range partial {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("the killed process's partial file %s is still there after the restart (%v)", p, err)
		}
	}
	api.base = second.url
	// The same version exported by the restarted process, untouched.
	reference := api.startExport()

	var got exportObject
	for {
		got = api.export(killed)
		if got.Status == "succeeded" || got.Status == "failed" {
			break
		}
		if time.Since(restarted) > resumeWithin {
			t.Fatalf("the killed export is still %s %.0fs after the restart\n%s", got.Status, time.Since(restarted).Seconds(), second.logs())
		}
		time.Sleep(250 * time.Millisecond)
	}
	took := time.Since(restarted)
	if got.Status != "succeeded" {
		t.Fatalf("the killed export ended %s: %s", got.Status, got.Error)
	}
	var rescued string
	var retried time.Time
	if err := pool.QueryRow(ctx, `SELECT j.errors[1]->>'error', j.attempted_at FROM river_job j WHERE j.kind = 'dataset_export' AND j.args->>'export_id' = $1`,
		killed.String()).Scan(&rescued, &retried); err != nil || !strings.Contains(rescued, "heartbeats") {
		t.Errorf("the killed attempt's recorded error: %q (%v), want the heartbeat sweep's", rescued, err)
	}
	t.Logf("the killed export of %d pairs finished %.1fs after the restart: retried after %.1fs, written in %.1fs",
		pairs, took.Seconds(), retried.Sub(restarted).Seconds(), took.Seconds()-retried.Sub(restarted).Seconds())

	want := api.wait(reference, resumeWithin)
	if !bytes.Equal(got.Manifest, want.Manifest) {
		t.Fatalf("manifests differ:\nkilled and retried %s\nuninterrupted      %s", got.Manifest, want.Manifest)
	}
	m, err := export.ReadManifest(bytes.NewReader(got.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	if m.Counts["train"]+m.Counts["validation"] != pairs {
		t.Fatalf("manifest counts %v, want %d rows in all", m.Counts, pairs)
	}
	for _, f := range m.Files {
		for _, id := range []uuid.UUID{killed, reference} {
			if sum := api.fileSHA256(id, f.Name); sum != f.SHA256 {
				t.Errorf("export %s: %s has sha256 %s, the manifest says %s", id, f.Name, sum, f.SHA256)
			}
		}
	}

	second.stop()
	if left := scratchFiles(t, dataDir); len(left) != 0 {
		t.Errorf("files left in the data directory's scratch: %v", left)
	}
	err = filepath.WalkDir(filepath.Join(dataDir, "exports"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".tmp") {
			t.Errorf("a half-stored file is left: %s", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(procTmp); len(entries) != 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the processes' TMPDIR holds %v", names)
	}
}

// curatingDataset stores n preference pairs with SQL and makes a DPO
// dataset of them, split 90/10, ready to be frozen.
func curatingDataset(t *testing.T, pool *pgxpool.Pool, org uuid.UUID, n int) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO preference_pairs (org_id, prompt, query, chosen_response, rejected_response, method, content_hash)
		SELECT $1, jsonb_build_array(jsonb_build_object('role', 'user', 'content', 'How do I roll out service ' || i || '?')),
			'How do I roll out service ' || i || '?',
			'Open Deployments, filter by service ' || i || ' and press Roll out. The panel lists each rollout with its health checks; ' ||
				'a green tick means every replica passed, and a failed check links to the pod''s logs.',
			'Ask someone who knows service ' || i || '.',
			'manual', sha256(convert_to('pair ' || i, 'UTF8'))
		FROM generate_series(1, $2::int) AS i`, org, n); err != nil {
		t.Fatal(err)
	}
	svc := datasets.New(pool, nil, nil, nil)
	d, err := svc.Create(ctx, audit.System, org, datasets.NewDataset{Type: datasets.TypeDPO,
		Settings: datasets.Settings{Name: "rollouts", ValidationPercent: 10, SplitSeed: 7}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO training_dataset_members (dataset_id, org_id, pair_id) SELECT $1, org_id, id FROM preference_pairs WHERE org_id = $2`, d.ID, org); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE training_datasets SET status = 'curating' WHERE id = $1`, d.ID); err != nil {
		t.Fatal(err)
	}
	return d.ID
}

// scratchFiles lists the files under the data directory's scratch.
func scratchFiles(t *testing.T, dataDir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(dataDir, "tmp"), func(path string, d fs.DirEntry, err error) error {
		if os.IsNotExist(err) {
			return nil // removed while walking
		}
		if err == nil && !d.IsDir() {
			out = append(out, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// curateProcess is a running `curate serve` (or another command).
type curateProcess struct {
	t   *testing.T
	cmd *exec.Cmd
	url string

	mu   sync.Mutex
	log  bytes.Buffer
	done chan struct{} // closed when the process has exited
}

// startCurate starts `curate serve` and waits until it listens.
// resumeWithin is how long after the restarted process is ready a killed
// job's work must be done. The heartbeat sweep retries a dead worker's job
// 25 to 45 s after its last beat; the rest is room for a loaded 2-core
// machine, where the retried work itself is slow. River's own rescue of
// these kinds comes only after their timeouts (30 minutes and more), so
// finishing within this still proves the sweep resumed the work. The
// deadline runs from the restart being ready, not from the command that
// started it: starting (migrations, the workers' first connections) is
// not what these tests measure.
const resumeWithin = 3 * time.Minute

// underwayWithin is how long the work may take to get under way before
// the kill: nothing is measured there, so a loaded machine gets as much
// room as it needs.
const underwayWithin = 3 * time.Minute

func startCurate(t *testing.T, bin string, env []string) *curateProcess {
	t.Helper()
	return startProcess(t, bin, env, regexp.MustCompile(`msg="curate is running".* url=(\S+)`), "serve")
}

// startProcess starts `curate args...` and waits until it logs a line that
// ready matches; the line's first group, when ready has one, is its url.
func startProcess(t *testing.T, bin string, env []string, ready *regexp.Regexp, args ...string) *curateProcess {
	t.Helper()
	name := "curate " + strings.Join(args, " ")
	p := &curateProcess{t: t, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = env
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = io.Discard
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.kill)
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log.WriteString(line + "\n")
			p.mu.Unlock()
			if m := ready.FindStringSubmatch(line); m != nil {
				select {
				case listening <- append(m, "")[1]:
				default: // only the first match counts; keep draining stderr
				}
			}
		}
		_ = p.cmd.Wait()
		close(p.done)
	}()
	select {
	case p.url = <-listening:
		return p
	case <-p.done:
		t.Fatalf("%s exited:\n%s", name, p.logs())
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not start:\n%s", name, p.logs())
	}
	return nil
}

func (p *curateProcess) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// kill ends the process with SIGKILL: no shutdown code runs.
func (p *curateProcess) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// stop ends the process as an operator would, with SIGTERM.
func (p *curateProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(45 * time.Second):
		p.t.Errorf("curate %s did not stop on SIGTERM:\n%s", strings.Join(p.cmd.Args[1:], " "), p.logs())
		p.kill()
	}
}

type exportObject struct {
	ID       uuid.UUID       `json:"id"`
	Status   string          `json:"status"`
	RowsDone int             `json:"rows_done"`
	Error    string          `json:"error"`
	Manifest json.RawMessage `json:"manifest"`
}

// apiClient calls the export API with an admin key.
type apiClient struct {
	t       *testing.T
	key     string
	base    string
	dataset uuid.UUID
}

func (c *apiClient) do(method, path string, body io.Reader) *http.Response {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

func (c *apiClient) startExport() uuid.UUID {
	c.t.Helper()
	resp := c.do(http.MethodPost, fmt.Sprintf("/api/training-datasets/%s/export", c.dataset), strings.NewReader(`{"format":"trl_preference"}`))
	defer resp.Body.Close()
	var e exportObject
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != http.StatusAccepted {
		c.t.Fatalf("starting an export: %d %+v %v", resp.StatusCode, e, err)
	}
	return e.ID
}

func (c *apiClient) export(id uuid.UUID) exportObject {
	c.t.Helper()
	resp := c.do(http.MethodGet, fmt.Sprintf("/api/training-datasets/%s/exports/%s", c.dataset, id), nil)
	defer resp.Body.Close()
	var e exportObject
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != http.StatusOK {
		c.t.Fatalf("export %s: %d %v", id, resp.StatusCode, err)
	}
	return e
}

// wait returns the export once it has succeeded.
func (c *apiClient) wait(id uuid.UUID, limit time.Duration) exportObject {
	c.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		e := c.export(id)
		switch {
		case e.Status == "succeeded":
			return e
		case e.Status == "failed":
			c.t.Fatalf("export %s failed: %s", id, e.Error)
		case time.Now().After(deadline):
			c.t.Fatalf("export %s is still %s", id, e.Status)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// fileSHA256 downloads one file of an export and returns its sha256.
func (c *apiClient) fileSHA256(id uuid.UUID, name string) string {
	c.t.Helper()
	resp := c.do(http.MethodGet, fmt.Sprintf("/api/training-datasets/%s/exports/%s/files/%s", c.dataset, id, name), nil)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("downloading %s of %s: %d", name, id, resp.StatusCode)
	}
	h := sha256.New()
	if _, err := io.Copy(h, resp.Body); err != nil {
		c.t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Command benchtable reads `go test -bench` output on stdin (as make bench
// runs it) and prints one table: each workload, Curate's figure, the raw
// PostgreSQL figure measured in the same run, their ratio against its goal,
// and peak memory where it matters. Benchmark lines pass through first, so
// nothing is hidden. A benchmark run several times (make bench's -count)
// gives each figure as its median [min–max] over the runs, each run's own
// alternating rounds of Curate and the floor, so a figure that moves is
// shown as moving.
package main

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// metrics are one benchmark's reported figures by unit.
type metrics map[string]float64

func parse(line string) (string, metrics, bool) {
	f := strings.Fields(line)
	if len(f) < 3 || !strings.HasPrefix(f[0], "Benchmark") {
		return "", nil, false
	}
	name := f[0]
	if i := strings.LastIndex(name, "-"); i > 0 {
		name = name[:i] // the GOMAXPROCS suffix
	}
	m := metrics{}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			continue
		}
		m[f[i+1]] = v
	}
	return name, m, true
}

func main() {
	found := map[string]runs{}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fmt.Println(line)
		if name, m, ok := parse(line); ok {
			found[name] = append(found[name], m)
		}
	}
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Println()
	fmt.Fprintln(w, "workload (runs)\tCurate\traw PostgreSQL\tratio\tgoal\tpeak memory\t")
	row := func(r runs, workload, curate, raw, ratio, goal, mem string) {
		fmt.Fprintf(w, "%s (%d)\t%s\t%s\t%s\t%s\t%s\t\n", workload, len(r), curate, raw, ratio, goal, mem)
	}
	if m, ok := found["BenchmarkFeedbackPost"]; ok {
		row(m, "single feedback POST, 32 clients", m.fig("api_req/s").rate("req/s"), m.fig("floor_req/s").rate("req/s minimal server"),
			m.fig("api_%_of_floor").pct(), "≥ 80%", "")
		row(m, "  its p99", m.fig("api_p99_ms").show("%.1f", " ms"), m.fig("floor_p99_ms").show("%.1f", " ms minimal server"),
			m.fig("api_p99/floor").show("%.2f", "×"), "≤ 2×", "")
		row(m, "  the same POST beside raw INSERTs", m.fig("api_req/s").rate("req/s"), m.fig("insert_rows/s").rate("INSERT/s"),
			m.fig("api_%_of_raw").pct(), "", "")
		row(m, "  the same ingest without HTTP", m.fig("ingest_rows/s").rate("rows/s"), m.fig("insert_rows/s").rate("INSERT/s"),
			m.fig("ingest_%_of_raw").pct(), "", "")
	}
	if m, ok := found["BenchmarkFeedbackBatch"]; ok {
		row(m, "batch ingest (10,000 a request)", m.fig("api_rows/s").rate("rows/s"), m.fig("copy_rows/s").rate("COPY rows/s"), m.fig("api_%_of_raw").pct(), "", "")
	}
	if m, ok := found["BenchmarkExport"]; ok {
		n := fmt.Sprintf("%.0f", m.fig("rows").median())
		row(m, "export of "+n+" pairs (report read back)", m.fig("export_rows/s").rate("rows/s"), m.fig("pg_copy_json_rows/s").rate("COPY TO rows/s"),
			m.fig("export_%_of_copy").pct(), "≥ 50%", m.fig("vmhwm_MiB").show("%.0f", " MiB RSS (≤ 150)"))
		row(m, "freeze of "+n+" pairs", m.fig("freeze_s").show("%.1f", " s"), "", "", "≤ 30 s at 1M", "")
		row(m, "validation report of "+n+" pairs, once", m.fig("report_once_s").show("%.1f", " s"), "", "", "", "")
		row(m, "the same report from stored facts", m.fig("report_from_facts_s").show("%.1f", " s"), "", "", "", "")
	}
	if m, ok := found["BenchmarkFreeze"]; ok {
		row(m, fmt.Sprintf("freeze of %.0f pairs, median of 5", m.fig("rows").median()), m.fig("freeze_median_s").show("%.1f", " s"),
			m.fig("floor_median_s").show("%.1f", " s CREATE TABLE AS"), m.fig("freeze/floor").show("%.1f", "×"), "≤ 30 s at 1M", "")
	}
	if m, ok := found["BenchmarkEvaluationRun"]; ok {
		row(m, "evaluation, 500 items at 16, candidate and judge 200 ms", m.fig("run_s").show("%.2f", " s"),
			m.fig("floor_s").show("%.2f", " s same calls alone"), m.fig("run_%_over_floor").show("+%.1f", "%"), "", "")
		row(m, "  beside 500/16 × (0.2 + 0.2) s", m.fig("run_s").show("%.2f", " s"), m.fig("ideal_s").show("%.2f", " s"),
			m.fig("run_%_over_ideal").show("+%.1f", "%"), "≤ +10%", "")
	}
	if m, ok := found["BenchmarkQueuePage"]; ok {
		for _, f := range []string{"typical", "middle_page", "search", "tag_model"} {
			if len(m.fig(f+"_server_p95_ms")) == 0 {
				continue
			}
			row(m, "queue page p95, "+strings.ReplaceAll(f, "_", " "), m.fig(f+"_server_p95_ms").show("%.1f", " ms"),
				m.fig(f+"_sql_p95_ms").show("%.1f", " ms"), m.fig(f+"_server/sql").show("%.2f", "×"), "≤ 3×", "")
		}
	}
	if m, ok := found["BenchmarkCodebookRetrieve"]; ok {
		row(m, fmt.Sprintf("codebook retrieve p95, %.0f rules", m.fig("rules").median()), m.fig("retrieve_p95_ms").show("%.1f", " ms"),
			m.fig("sql_p95_ms").show("%.1f", " ms"), m.ratio("retrieve_p95_ms", "sql_p95_ms").show("%.2f", "×"), "< 10 ms", "")
	}
	if m, ok := found["BenchmarkBestOfNRewardModel"]; ok {
		row(m, fmt.Sprintf("best-of-N p95, %.0f candidates, reward model (stand-in %.0f ms a request)", m.fig("candidates").median(), m.fig("model_ms").median()),
			m.fig("bestofn_p95_ms").show("%.1f", " ms"), m.fig("standin_p95_ms").show("%.1f", " ms stand-in"),
			m.fig("overhead_p95_ms").show("+%.1f", " ms"), "≤ +10 ms", "")
	}
	if m, ok := found["BenchmarkAssignAPI"]; ok {
		for _, f := range []string{"new", "known"} {
			row(m, fmt.Sprintf("assign, %s units, 32 clients (p99 %s ms, raw %s ms)", f, m.fig(f+"_p99_ms").show("%.0f", ""), m.fig("raw_"+f+"_p99_ms").show("%.0f", "")),
				m.fig(f+"_req/s").rate("req/s"), m.fig("raw_"+f+"_req/s").rate("INSERT … RETURNING/s"), m.fig(f+"_%_of_raw").pct(), "≥ 80%", "")
		}
	}
	if m, ok := found["BenchmarkAssignBatch"]; ok {
		row(m, fmt.Sprintf("assign-batch of 1,000 new units, median (p95 %s ms)", m.fig("batch_p95_ms").show("%.1f", "")), m.fig("batch_ms").show("%.1f", " ms"),
			m.fig("raw_batch_ms").show("%.1f", " ms one INSERT"), m.ratio("batch_ms", "raw_batch_ms").show("%.2f", "×"), "< 50 ms", "")
	}
	if m, ok := found["BenchmarkResults"]; ok {
		row(m, fmt.Sprintf("results over %.0f feedback rows, %.0f units, median", m.fig("rows").median(), m.fig("units").median()), m.fig("results_ms").show("%.0f", " ms"),
			m.fig("groupby_ms").show("%.0f", " ms GROUP BY"), m.fig("results/groupby").show("%.2f", "×"), "≤ 1.5× or < 2 s", "")
		if len(m.fig("first_results_ms")) > 0 {
			row(m, "  the phase's first results (the units' kept values made)", m.fig("first_results_ms").show("%.0f", " ms"),
				m.fig("groupby_ms").show("%.0f", " ms GROUP BY"), m.ratio("first_results_ms", "groupby_ms").show("%.2f", "×"), "", "")
		}
	}
	w.Flush()
	for _, n := range sizeNotes(found) {
		fmt.Println(n)
	}
}

// goalSizes are the sizes the goals of the benchmarks that load a
// database were set at, and the setting that runs a benchmark at it.
var goalSizes = []struct {
	bench, what, setting string
	rows                 float64
}{
	{"BenchmarkResults", "results over feedback rows", "CURATE_BENCH_RESULTS_ROWS", 10_000_000},
	{"BenchmarkFreeze", "the freeze of pairs", "CURATE_BENCH_ROWS", 1_000_000},
}

// sizeNotes says which benchmarks ran below the size their goal was set
// at: a figure at a smaller size does not show the goal met.
func sizeNotes(found map[string]runs) []string {
	var out []string
	for _, g := range goalSizes {
		m, ok := found[g.bench]
		if !ok || len(m.fig("rows")) == 0 {
			continue
		}
		if n := m.fig("rows").median(); n < g.rows {
			out = append(out, fmt.Sprintf("Note: %s ran at %s rows; its goal is set at %s (%s=%.0f). The README's scaling section gives the largest size run.",
				g.what, thousands(n), thousands(g.rows), g.setting, g.rows))
		}
	}
	return out
}

// thousands writes n with a comma between each three digits.
func thousands(n float64) string {
	s := strconv.FormatFloat(n, 'f', 0, 64)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// runs are the lines one benchmark printed, one a run.
type runs []metrics

// fig is a metric's value in each run that reported it.
func (r runs) fig(unit string) fig {
	var f fig
	for _, m := range r {
		if v, ok := m[unit]; ok {
			f = append(f, v)
		}
	}
	return f
}

// ratio is a/b in each run that reported both.
func (r runs) ratio(a, b string) fig {
	var f fig
	for _, m := range r {
		x, okA := m[a]
		y, okB := m[b]
		if okA && okB && y != 0 {
			f = append(f, x/y)
		}
	}
	return f
}

// fig is one figure over runs.
type fig []float64

func (f fig) sorted() []float64 {
	s := append([]float64(nil), f...)
	sort.Float64s(s)
	return s
}

// median is the middle value (the mean of the two middle ones for an even
// count); 0 for none.
func (f fig) median() float64 {
	s := f.sorted()
	switch {
	case len(s) == 0:
		return 0
	case len(s)%2 == 1:
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// show writes the median by format, then [min–max] when there were several
// runs, then unit; "—" when no run reported it.
func (f fig) show(format, unit string) string {
	if len(f) == 0 {
		return "—"
	}
	s := f.sorted()
	out := fmt.Sprintf(format, f.median())
	if len(s) > 1 {
		out += fmt.Sprintf(" ["+format+"–"+format+"]", s[0], s[len(s)-1])
	}
	return out + unit
}

func (f fig) rate(unit string) string {
	if len(f) == 0 || f.median() == 0 {
		return "—"
	}
	return f.show("%.0f", " "+unit)
}

func (f fig) pct() string {
	if len(f) == 0 || f.median() == 0 {
		return "—"
	}
	return f.show("%.0f", "%")
}

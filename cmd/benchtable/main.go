// Command benchtable reads `go test -bench` output on stdin (as make bench
// runs it) and prints one table: each workload, Curate's figure, the raw
// PostgreSQL figure measured in the same run, their ratio against its goal,
// and peak memory where it matters. Benchmark lines pass through first, so
// nothing is hidden.
package main

import (
	"bufio"
	"fmt"
	"os"
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
	found := map[string]metrics{}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fmt.Println(line)
		if name, m, ok := parse(line); ok {
			found[name] = m
		}
	}
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Println()
	fmt.Fprintln(w, "workload\tCurate\traw PostgreSQL\tratio\tgoal\tpeak memory\t")
	row := func(workload, curate, raw, ratio, goal, mem string) {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t\n", workload, curate, raw, ratio, goal, mem)
	}
	if m, ok := found["BenchmarkFeedbackPost"]; ok {
		row("single feedback POST, 32 clients", rate(m["api_req/s"], "req/s"), rate(m["floor_req/s"], "req/s minimal server"),
			pct(m["api_%_of_floor"]), "≥ 80%", "")
		row("  its p99", fmt.Sprintf("%.1f ms", m["api_p99_ms"]), fmt.Sprintf("%.1f ms minimal server", m["floor_p99_ms"]),
			fmt.Sprintf("%.2f×", m["api_p99/floor"]), "≤ 2×", "")
		row("  the same POST beside raw INSERTs", rate(m["api_req/s"], "req/s"), rate(m["insert_rows/s"], "INSERT/s"),
			pct(m["api_%_of_raw"]), "", "")
		row("  the same ingest without HTTP", rate(m["ingest_rows/s"], "rows/s"), rate(m["insert_rows/s"], "INSERT/s"),
			pct(m["ingest_%_of_raw"]), "", "")
	}
	if m, ok := found["BenchmarkFeedbackBatch"]; ok {
		row("batch ingest (10,000 a request)", rate(m["api_rows/s"], "rows/s"), rate(m["copy_rows/s"], "COPY rows/s"), pct(m["api_%_of_raw"]), "", "")
	}
	if m, ok := found["BenchmarkExport"]; ok {
		n := fmt.Sprintf("%.0f", m["rows"])
		row("export of "+n+" pairs (report read back)", rate(m["export_rows/s"], "rows/s"), rate(m["pg_copy_json_rows/s"], "COPY TO rows/s"),
			pct(m["export_%_of_copy"]), "≥ 50%", fmt.Sprintf("%.0f MiB RSS (≤ 150)", m["vmhwm_MiB"]))
		row("freeze of "+n+" pairs", fmt.Sprintf("%.1f s", m["freeze_s"]), "", "", "≤ 30 s at 1M", "")
		row("validation report of "+n+" pairs, once", fmt.Sprintf("%.1f s", m["report_once_s"]), "", "", "", "")
		row("the same report from stored facts", fmt.Sprintf("%.1f s", m["report_from_facts_s"]), "", "", "", "")
	}
	if m, ok := found["BenchmarkFreeze"]; ok {
		row(fmt.Sprintf("freeze of %.0f pairs, median of 3", m["rows"]), fmt.Sprintf("%.1f s", m["freeze_median_s"]),
			fmt.Sprintf("%.1f s CREATE TABLE AS", m["floor_median_s"]), fmt.Sprintf("%.1f×", m["freeze/floor"]), "≤ 30 s at 1M", "")
	}
	if m, ok := found["BenchmarkEvaluationRun"]; ok {
		row("evaluation, 500 items at 16, candidate and judge 200 ms", fmt.Sprintf("%.2f s", m["run_s"]),
			fmt.Sprintf("%.2f s same calls alone", m["floor_s"]), fmt.Sprintf("+%.1f%%", m["run_%_over_floor"]), "", "")
		row("  beside 500/16 × (0.2 + 0.2) s", fmt.Sprintf("%.2f s", m["run_s"]), fmt.Sprintf("%.2f s", m["ideal_s"]),
			fmt.Sprintf("+%.1f%%", m["run_%_over_ideal"]), "≤ +10%", "")
	}
	if m, ok := found["BenchmarkQueuePage"]; ok {
		for _, f := range []string{"typical", "middle_page", "search", "tag_model"} {
			if _, ok := m[f+"_server_p95_ms"]; !ok {
				continue
			}
			row("queue page p95, "+strings.ReplaceAll(f, "_", " "), fmt.Sprintf("%.1f ms", m[f+"_server_p95_ms"]),
				fmt.Sprintf("%.1f ms", m[f+"_sql_p95_ms"]), fmt.Sprintf("%.2f×", m[f+"_server/sql"]), "≤ 3×", "")
		}
	}
	if m, ok := found["BenchmarkCodebookRetrieve"]; ok {
		row(fmt.Sprintf("codebook retrieve p95, %.0f rules", m["rules"]), fmt.Sprintf("%.1f ms", m["retrieve_p95_ms"]),
			fmt.Sprintf("%.1f ms", m["sql_p95_ms"]), fmt.Sprintf("%.2f×", m["retrieve_p95_ms"]/m["sql_p95_ms"]), "< 10 ms", "")
	}
	if m, ok := found["BenchmarkBestOfNRewardModel"]; ok {
		row(fmt.Sprintf("best-of-N p95, %.0f candidates, reward model (stand-in %.0f ms a request)", m["candidates"], m["model_ms"]),
			fmt.Sprintf("%.1f ms", m["bestofn_p95_ms"]), fmt.Sprintf("%.1f ms stand-in", m["standin_p95_ms"]),
			fmt.Sprintf("+%.1f ms", m["overhead_p95_ms"]), "≤ +10 ms", "")
	}
	if m, ok := found["BenchmarkAssignAPI"]; ok {
		for _, f := range []string{"new", "known"} {
			row(fmt.Sprintf("assign, %s units, 32 clients (p99 %.0f ms, raw %.0f ms)", f, m[f+"_p99_ms"], m["raw_"+f+"_p99_ms"]),
				rate(m[f+"_req/s"], "req/s"), rate(m["raw_"+f+"_req/s"], "INSERT … RETURNING/s"), pct(m[f+"_%_of_raw"]), "≥ 80%", "")
		}
	}
	if m, ok := found["BenchmarkAssignBatch"]; ok {
		row(fmt.Sprintf("assign-batch of 1,000 new units, median (p95 %.1f ms)", m["batch_p95_ms"]), fmt.Sprintf("%.1f ms", m["batch_ms"]),
			fmt.Sprintf("%.1f ms one INSERT", m["raw_batch_ms"]), fmt.Sprintf("%.2f×", m["batch_ms"]/m["raw_batch_ms"]), "< 50 ms", "")
	}
	if m, ok := found["BenchmarkResults"]; ok {
		row(fmt.Sprintf("results over %.0f feedback rows, %.0f units, median", m["rows"], m["units"]), fmt.Sprintf("%.0f ms", m["results_ms"]),
			fmt.Sprintf("%.0f ms GROUP BY", m["groupby_ms"]), fmt.Sprintf("%.2f×", m["results/groupby"]), "≤ 1.5×", "")
	}
	w.Flush()
}

func rate(v float64, unit string) string {
	if v == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f %s", v, unit)
}

func pct(v float64) string {
	if v == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f%%", v)
}

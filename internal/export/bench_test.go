package export

import (
	"io"
	"testing"
)

// BenchmarkWriteTRL writes one million preference pairs per iteration to
// io.Discard, reporting throughput and allocations per row.
func BenchmarkWriteTRL(b *testing.B) {
	const rows = 1_000_000
	ex := PrefExample{
		System:   "You are a support assistant for a deployment dashboard.",
		Prompt:   []Message{{Role: RoleUser, Content: "How do I check deployment status? The page shows \"pending\" & nothing else."}},
		Chosen:   "Open Deployments > Status. Each row shows the current phase; click it for the log.",
		Rejected: "Click on the deployments tab.",
	}
	b.ReportAllocs()
	for b.Loop() {
		w, err := NewWriter(TRLPreference, io.Discard, "")
		if err != nil {
			b.Fatal(err)
		}
		for range rows {
			if err := w.WritePref(ex); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*rows/b.Elapsed().Seconds(), "rows/s")
}

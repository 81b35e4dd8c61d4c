package experiments_test

import (
	"fmt"
	"testing"

	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/serving/vllmtest"
)

// BenchmarkAssign times one unit's assignment in a running experiment
// whose two arms are adapters served by a vLLM stand-in: a unit seen
// before (the sticky read) and a new unit (its first exposure recorded).
func BenchmarkAssign(b *testing.B) {
	e := newEnv(b)
	vllm := vllmtest.New(b, base)
	e.target(b, "gpu-1", vllm.URL)
	v1 := e.register(b, "1.0.0", models.KindLoRA, "/adapters/support-1")
	v2 := e.register(b, "1.1.0", models.KindLoRA, "/adapters/support-2")
	e.deploy(b, v1, "staging", "gpu-1")
	e.deploy(b, v2, "production", "gpu-1")
	e.create(b, "bench", v1, v2)
	if _, err := e.exp.SetStatus(e.ctx, admin, e.org, "bench", experiments.Running, "", ""); err != nil {
		b.Fatal(err)
	}
	b.Run("seen", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.exp.Assign(e.ctx, e.org, "bench", []string{"regular"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("new", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			if _, err := e.exp.Assign(e.ctx, e.org, "bench", []string{fmt.Sprintf("new-%d", i)}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

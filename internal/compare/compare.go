// Package compare sets two model versions side by side, as a reviewer
// deciding between them needs: their evaluations on one golden set item by
// item (which items regressed, which improved, by how much, with both
// critiques), their training curves on one chart, and where they came from
// (data, hashes, method, hyperparameters) as a difference.
package compare

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/models"
)

// Service compares versions through the services that own them.
type Service struct {
	Eval     *eval.Service
	Models   *models.Service
	FineTune *finetune.Service
}

// New builds the comparison on the evaluation, registry and fine-tuning
// services.
func New(ev *eval.Service, reg *models.Service, ft *finetune.Service) *Service {
	return &Service{Eval: ev, Models: reg, FineTune: ft}
}

// Comparison is two versions side by side.
type Comparison struct {
	A models.Version `json:"a"`
	B models.Version `json:"b"`
	// Evaluation is both versions' newest evaluations on one golden set;
	// nil, with EvaluationMissing saying why, when they have none in
	// common.
	Evaluation        *eval.VersionPair `json:"evaluation"`
	EvaluationMissing string            `json:"evaluation_missing,omitempty"`
	Curves            Curves            `json:"curves"`
	Lineage           []Row             `json:"lineage"`
}

// Curves are both versions' training losses by step; empty for a version
// no job of Curate trained.
type Curves struct {
	A []Point `json:"a"`
	B []Point `json:"b"`
}

// Point is one step's losses.
type Point struct {
	Step      int      `json:"step"`
	TrainLoss *float64 `json:"train_loss"`
	ValidLoss *float64 `json:"valid_loss"`
}

// Row is one property of both versions, as text.
type Row struct {
	Field   string `json:"field"`
	Label   string `json:"label"`
	A       string `json:"a"`
	B       string `json:"b"`
	Differs bool   `json:"differs"`
}

// Request names the versions, and optionally the golden set and an item
// filter (eval.Filters).
type Request struct {
	A, B      uuid.UUID
	GoldenSet *uuid.UUID
	Filter    string
}

// Compare sets versions A and B of the organisation side by side. With no
// golden set named, the evaluations compared are on the newest set both
// were evaluated on; a named set on which either has no finished
// evaluation is refused by field.
func (s *Service) Compare(ctx context.Context, orgID uuid.UUID, r Request) (Comparison, error) {
	v := &errs.Invalid{}
	if r.A == uuid.Nil {
		v.Add("a", "is required: the id of a model version")
	}
	if r.B == uuid.Nil {
		v.Add("b", "is required: the id of a model version")
	}
	if r.A != uuid.Nil && r.A == r.B {
		v.Add("b", "is the same version as a: choose another")
	}
	if r.Filter != "" && !slices.Contains(eval.Filters, r.Filter) {
		v.Add("filter", "must be one of %v", eval.Filters)
	}
	if err := v.Err(); err != nil {
		return Comparison{}, err
	}
	var out Comparison
	var err error
	if out.A, err = s.Models.Get(ctx, orgID, r.A); err != nil {
		return Comparison{}, fieldNotFound("a", err)
	}
	if out.B, err = s.Models.Get(ctx, orgID, r.B); err != nil {
		return Comparison{}, fieldNotFound("b", err)
	}
	pair, err := s.Eval.PairVersions(ctx, orgID, r.A, r.B, r.GoldenSet)
	var inv *errs.Invalid
	switch {
	case r.GoldenSet == nil && errors.As(err, &inv):
		out.EvaluationMissing = "The two versions have no finished evaluation on a common golden set: evaluate both on one to compare their answers."
	case err != nil:
		return Comparison{}, err
	default:
		kept := pair.Items[:0:0]
		for _, it := range pair.Items {
			if it.Keep(r.Filter) {
				kept = append(kept, it)
			}
		}
		pair.Items = kept
		out.Evaluation = &pair
	}
	jobA, jobB, err := s.jobs(ctx, orgID, out.A, out.B)
	if err != nil {
		return Comparison{}, err
	}
	out.Curves = Curves{A: curve(jobA), B: curve(jobB)}
	out.Lineage = lineage(out.A, out.B, jobA, jobB)
	return out, nil
}

// fieldNotFound words a version that is not the organisation's as a
// refusal of the field that named it.
func fieldNotFound(field string, err error) error {
	if errors.Is(err, errs.ErrNotFound) {
		return errs.InvalidField(field, "is not a model version of this organisation")
	}
	return err
}

// jobs reads the fine-tuning job of each version; nil for a version no job
// trained (registered by hand), or whose job is gone.
func (s *Service) jobs(ctx context.Context, orgID uuid.UUID, vs ...models.Version) (*finetune.Detail, *finetune.Detail, error) {
	var out [2]*finetune.Detail
	for i, v := range vs {
		if v.FineTuningJobID == nil {
			continue
		}
		d, err := s.FineTune.Get(ctx, orgID, *v.FineTuningJobID)
		if errors.Is(err, errs.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		out[i] = &d
	}
	return out[0], out[1], nil
}

func curve(d *finetune.Detail) []Point {
	out := []Point{}
	if d == nil {
		return out
	}
	for _, m := range d.Metrics {
		p := Point{Step: int(m.Step)}
		if m.TrainLoss.Valid {
			p.TrainLoss = &m.TrainLoss.Float64
		}
		if m.ValidLoss.Valid {
			p.ValidLoss = &m.ValidLoss.Float64
		}
		out = append(out, p)
	}
	slices.SortStableFunc(out, func(x, y Point) int { return cmp.Compare(x.Step, y.Step) })
	return out
}

// lineage lists what the versions came from and how they were trained,
// one row a property, hyperparameters by name.
func lineage(a, b models.Version, ja, jb *finetune.Detail) []Row {
	var rows []Row
	add := func(field, label, x, y string) {
		rows = append(rows, Row{Field: field, Label: label, A: x, B: y, Differs: x != y})
	}
	add("model", "Registered model", a.Name, b.Name)
	add("version", "Version", a.Version, b.Version)
	add("kind", "Kind", a.Kind, b.Kind)
	add("base_model", "Base model", a.BaseModel, b.BaseModel)
	add("dataset_version_id", "Dataset version", uuidText(a.DatasetVersionID), uuidText(b.DatasetVersionID))
	add("dataset_hash", "Dataset content hash", a.DatasetHash, b.DatasetHash)
	add("trained_tokens", "Trained tokens", strconv.FormatInt(a.TrainedTokens, 10), strconv.FormatInt(b.TrainedTokens, 10))
	add("train_loss", "Final training loss", floatText(a.TrainLoss), floatText(b.TrainLoss))
	add("valid_loss", "Final validation loss", floatText(a.ValidLoss), floatText(b.ValidLoss))
	add("cost_usd", "Training cost (USD)", floatText(a.CostUSD), floatText(b.CostUSD))
	job := func(d *finetune.Detail, f func(*finetune.Detail) string) string {
		if d == nil {
			return ""
		}
		return f(d)
	}
	add("provider", "Trained at", job(ja, func(d *finetune.Detail) string { return d.Job.Provider }), job(jb, func(d *finetune.Detail) string { return d.Job.Provider }))
	add("method", "Method", job(ja, func(d *finetune.Detail) string { return d.Job.Method }), job(jb, func(d *finetune.Detail) string { return d.Job.Method }))
	add("dataset", "Dataset", job(ja, func(d *finetune.Detail) string { return d.Job.DatasetLabel }), job(jb, func(d *finetune.Detail) string { return d.Job.DatasetLabel }))
	add("train_examples", "Training examples", job(ja, func(d *finetune.Detail) string { return strconv.Itoa(int(d.Job.TrainExamples)) }),
		job(jb, func(d *finetune.Detail) string { return strconv.Itoa(int(d.Job.TrainExamples)) }))
	ha, hb := hyperparameters(ja), hyperparameters(jb)
	keys := slices.Sorted(maps.Keys(ha))
	for k := range hb {
		if _, ok := ha[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		add("hyperparameters."+k, "Hyperparameter "+k, ha[k], hb[k])
	}
	return rows
}

// hyperparameters reads a job's hyperparameters as text by name.
func hyperparameters(d *finetune.Detail) map[string]string {
	out := map[string]string{}
	if d == nil {
		return out
	}
	var hp map[string]json.RawMessage
	if json.Unmarshal(d.Job.Hyperparameters, &hp) != nil {
		return out
	}
	for k, v := range hp {
		var s string
		if json.Unmarshal(v, &s) == nil {
			out[k] = s
			continue
		}
		out[k] = string(v)
	}
	return out
}

func uuidText(id *uuid.UUID) string {
	if id == nil {
		return ""
	}
	return id.String()
}

func floatText(f *float64) string {
	if f == nil {
		return ""
	}
	return fmt.Sprintf("%.4g", *f)
}

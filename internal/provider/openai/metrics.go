package openai

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/curate/curate/internal/provider"
)

// maxResultBytes bounds the result file read into memory: one short CSV
// row per training step.
const maxResultBytes = 64 << 20

// Metrics reads the job's result file: a CSV of per-step metrics that
// OpenAI publishes when the job ends. Before then there are none.
func (p *Provider) Metrics(ctx context.Context, jobID string) ([]provider.StepMetric, error) {
	j, err := p.client.FineTuning.Jobs.Get(ctx, jobID)
	if err != nil {
		return nil, fail("get job", err)
	}
	if len(j.ResultFiles) == 0 {
		return nil, nil
	}
	resp, err := p.client.Files.Content(ctx, j.ResultFiles[0])
	if err != nil {
		return nil, fail("read result file", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResultBytes+1))
	if err != nil {
		return nil, fmt.Errorf("openai: read result file: %w", err)
	}
	if len(body) > maxResultBytes {
		return nil, fmt.Errorf("openai: result file %s is larger than %d bytes", j.ResultFiles[0], maxResultBytes)
	}
	return ParseResultCSV(body)
}

// ParseResultCSV parses a fine-tuning result file. OpenAI serves it
// base64-encoded; plain CSV is read as well. Columns are found by their
// header names (step, train_loss, train_accuracy, valid_loss,
// valid_mean_token_accuracy); an empty cell was not measured at that step.
func ParseResultCSV(content []byte) ([]provider.StepMetric, error) {
	text := bytes.TrimSpace(content)
	// A comma is never part of base64, and always part of this CSV.
	if !bytes.Contains(text, []byte(",")) {
		decoded, err := base64.StdEncoding.DecodeString(string(removeSpace(text)))
		if err != nil || !bytes.Contains(decoded, []byte(",")) {
			return nil, errors.New("openai: result file is neither CSV nor base64-encoded CSV")
		}
		text = bytes.TrimSpace(decoded)
	}
	r := csv.NewReader(bytes.NewReader(text))
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("openai: result file header: %w", err)
	}
	col := map[string]int{}
	for i, name := range header {
		col[strings.TrimSpace(name)] = i
	}
	if _, ok := col["step"]; !ok {
		return nil, errors.New(`openai: result file has no "step" column`)
	}
	var out []provider.StepMetric
	for line := 2; ; line++ {
		rec, err := r.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("openai: result file: %w", err)
		}
		m, err := parseRow(rec, col)
		if err != nil {
			return nil, fmt.Errorf("openai: result file line %d: %w", line, err)
		}
		out = append(out, m)
	}
}

func parseRow(rec []string, col map[string]int) (provider.StepMetric, error) {
	cell := func(name string) string {
		if i, ok := col[name]; ok && i < len(rec) {
			return strings.TrimSpace(rec[i])
		}
		return ""
	}
	var m provider.StepMetric
	step, err := strconv.Atoi(cell("step"))
	if err != nil {
		return m, fmt.Errorf("step %q is not a whole number", cell("step"))
	}
	m.Step = step
	for _, f := range []struct {
		name string
		dst  **float64
	}{
		{"train_loss", &m.TrainLoss},
		{"train_accuracy", &m.TrainAccuracy},
		{"valid_loss", &m.ValidLoss},
		{"valid_mean_token_accuracy", &m.ValidMeanTokenAccuracy},
	} {
		s := cell(f.name)
		if s == "" {
			continue
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return m, fmt.Errorf("%s %q is not a number", f.name, s)
		}
		*f.dst = &v
	}
	return m, nil
}

// removeSpace drops the line breaks some encoders put into base64.
func removeSpace(b []byte) []byte {
	return bytes.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, b)
}

package bedrock

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrock"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/curate/curate/internal/provider"
)

// The metrics files Bedrock writes under
// <output>/model-customization-job-<job id>/: training_artifacts/ holds
// the first, validation_artifacts/ the second.
const (
	trainingMetricsFile   = "step_wise_training_metrics.csv"
	validationMetricsFile = "validation_metrics.csv"
)

// maxMetricsBytes bounds a metrics file read into memory.
const maxMetricsBytes = 64 << 20

// Metrics reads the training and validation metrics files from the job's
// S3 output, merged by step. Before Bedrock writes them there are none.
func (p *Provider) Metrics(ctx context.Context, jobARN string) ([]provider.StepMetric, error) {
	out, err := p.bedrock.GetModelCustomizationJob(ctx, &bedrock.GetModelCustomizationJobInput{JobIdentifier: aws.String(jobARN)})
	if err != nil {
		return nil, fail("get job", err)
	}
	if out.OutputDataConfig == nil {
		return nil, nil
	}
	bucket, prefix, err := splitURI(aws.ToString(out.OutputDataConfig.S3Uri))
	if err != nil {
		return nil, err
	}
	// The job's id is the last part of its ARN.
	id := jobARN[strings.LastIndex(jobARN, "/")+1:]
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	prefix += "model-customization-job-" + id + "/"

	steps := map[int]*provider.StepMetric{}
	pages := s3.NewListObjectsV2Paginator(p.s3, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fail("list job output", err)
		}
		for _, obj := range page.Contents {
			key := aws.ToString(obj.Key)
			var lossColumn string
			switch {
			case strings.HasSuffix(key, "/"+trainingMetricsFile):
				lossColumn = "training_loss"
			case strings.HasSuffix(key, "/"+validationMetricsFile):
				lossColumn = "validation_loss"
			default:
				continue
			}
			if err := p.readMetrics(ctx, bucket, key, lossColumn, steps); err != nil {
				return nil, err
			}
		}
	}
	metrics := make([]provider.StepMetric, 0, len(steps))
	for _, m := range steps {
		metrics = append(metrics, *m)
	}
	slices.SortFunc(metrics, func(a, b provider.StepMetric) int { return a.Step - b.Step })
	return metrics, nil
}

func (p *Provider) readMetrics(ctx context.Context, bucket, key, lossColumn string, steps map[int]*provider.StepMetric) error {
	obj, err := p.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return fail("read s3://"+bucket+"/"+key, err)
	}
	defer obj.Body.Close()
	rows, err := ParseMetricsCSV(io.LimitReader(obj.Body, maxMetricsBytes), lossColumn)
	if err != nil {
		return fmt.Errorf("bedrock: s3://%s/%s: %w", bucket, key, err)
	}
	for _, r := range rows {
		m, ok := steps[r.Step]
		if !ok {
			m = &provider.StepMetric{Step: r.Step}
			steps[r.Step] = m
		}
		if m.Epoch == 0 {
			m.Epoch = r.Epoch
		}
		loss := r.Loss
		if lossColumn == "training_loss" {
			m.TrainLoss = &loss
		} else {
			m.ValidLoss = &loss
		}
	}
	return nil
}

// MetricsRow is one row of a Bedrock metrics file.
type MetricsRow struct {
	Step       int
	Epoch      int
	Loss       float64
	Perplexity float64
}

// ParseMetricsCSV reads a Bedrock metrics file: columns step_number,
// epoch_number, the loss column (training_loss or validation_loss) and
// perplexity, found by their header names.
func ParseMetricsCSV(r io.Reader, lossColumn string) ([]MetricsRow, error) {
	cr := csv.NewReader(r)
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	col := map[string]int{}
	for i, name := range header {
		col[strings.TrimSpace(name)] = i
	}
	for _, name := range []string{"step_number", "epoch_number", lossColumn} {
		if _, ok := col[name]; !ok {
			return nil, fmt.Errorf("no %q column", name)
		}
	}
	var out []MetricsRow
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		cell := func(name string) string {
			if i, ok := col[name]; ok && i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		var row MetricsRow
		if row.Step, err = strconv.Atoi(cell("step_number")); err != nil {
			return nil, fmt.Errorf("line %d: step_number %q is not a whole number", line, cell("step_number"))
		}
		if row.Epoch, err = strconv.Atoi(cell("epoch_number")); err != nil {
			return nil, fmt.Errorf("line %d: epoch_number %q is not a whole number", line, cell("epoch_number"))
		}
		if row.Loss, err = strconv.ParseFloat(cell(lossColumn), 64); err != nil {
			return nil, fmt.Errorf("line %d: %s %q is not a number", line, lossColumn, cell(lossColumn))
		}
		if s := cell("perplexity"); s != "" {
			if row.Perplexity, err = strconv.ParseFloat(s, 64); err != nil {
				return nil, fmt.Errorf("line %d: perplexity %q is not a number", line, s)
			}
		}
		out = append(out, row)
	}
}

package experiments

// MetricInfo is one metric as a form offers it: what it measures, read
// from the feedback attributed to each unit, and which way is good.
type MetricInfo struct {
	Name           string
	Measures       string
	HigherIsBetter bool
}

// measures says in one line what each metric reads from feedback; the
// query that sums them is ExperimentListMetricMoments.
var measures = map[string]string{
	ThumbsUpRate:   "The share of thumbs up among each unit's thumbs up and thumbs down.",
	AvgRating:      "Each unit's average star rating, 1 to 5.",
	CorrectionRate: "The share of each unit's feedback that carries a correction: an answer a person had to rewrite.",
	Latency:        "Each unit's average response time in milliseconds, as the assistant reported it.",
	AvgAccuracy:    "Each unit's average accuracy score, 1 to 5, from detailed feedback.",
	AvgHelpfulness: "Each unit's average helpfulness score, 1 to 5, from detailed feedback.",
	AvgClarity:     "Each unit's average clarity score, 1 to 5, from detailed feedback.",
	AvgSafety:      "Each unit's average safety score, 1 to 5, from detailed feedback.",
	AvgJudgeScore:  "Each unit's average judge score, 0 to 1, of its answers the live judge sampled and scored.",
}

// MetricInfos lists every metric in Metrics' order.
func MetricInfos() []MetricInfo {
	out := make([]MetricInfo, len(Metrics))
	for i, m := range Metrics {
		out[i] = MetricInfo{Name: m, Measures: measures[m], HigherIsBetter: higherIsBetter[m]}
	}
	return out
}

package stats

// Corrections for testing several metrics at once.
const (
	CorrectionNone = "none"
	// CorrectionHolm controls the family-wise error rate (Holm–Bonferroni),
	// the default for guardrails: any false alarm stops an experiment.
	CorrectionHolm = "holm"
	// CorrectionBH controls the false discovery rate (Benjamini–Hochberg),
	// the default for goal metrics.
	CorrectionBH = "bh"
)

// Corrections lists them.
var Corrections = []string{CorrectionBH, CorrectionHolm, CorrectionNone}

// Adjust adjusts a family's p-values by the method and gives the alpha at
// which the family's intervals are drawn so that they agree with it:
// Holm's p-values with Bonferroni's intervals at alpha/m (conservative:
// Holm's later steps are less strict than Bonferroni), and
// Benjamini–Hochberg's with Benjamini and Yekutieli's (2005) false
// coverage-rate intervals at alpha·R/m, R the number of metrics the
// adjusted p-values find significant (alpha/m when none is). With one
// p-value, or CorrectionNone, nothing changes.
func Adjust(method string, ps []float64, alpha float64) (adjusted []float64, intervalAlpha float64) {
	m := float64(len(ps))
	if m <= 1 || method == CorrectionNone || method == "" {
		return append([]float64(nil), ps...), alpha
	}
	switch method {
	case CorrectionHolm:
		return Holm(ps), alpha / m
	default:
		adjusted = BenjaminiHochberg(ps)
		r := 0.0
		for _, p := range adjusted {
			if p < alpha {
				r++
			}
		}
		return adjusted, alpha * max(r, 1) / m
	}
}

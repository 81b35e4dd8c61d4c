package stats

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
)

// Agreement between raters who label the same units: Cohen's kappa for
// two raters, Fleiss' kappa for a fixed number of labels per unit, and
// Krippendorff's alpha for any number of raters with labels missing, at
// four levels of measurement. All three read one ratings matrix and answer
// one Reliability, so a caller shows any of them with the counts behind it.

// The agreement metrics, as the API names them.
const (
	MetricCohenKappa        = "cohen_kappa"
	MetricFleissKappa       = "fleiss_kappa"
	MetricKrippendorffAlpha = "krippendorff_alpha"
)

// Level is the level of measurement of the labels: it decides how far
// apart two different labels are (Krippendorff's difference function).
type Level string

const (
	// LevelNominal: labels are categories; two labels agree or they do not.
	LevelNominal Level = "nominal"
	// LevelOrdinal: labels are ranks; the distance between two is how many
	// labels lie between them.
	LevelOrdinal Level = "ordinal"
	// LevelInterval: labels are numbers; the distance is their difference.
	LevelInterval Level = "interval"
	// LevelRatio: labels are numbers from a true zero; the distance is their
	// difference relative to their sum.
	LevelRatio Level = "ratio"
)

// MaxValues bounds the distinct labels one computation takes: the
// coincidence matrix holds MaxValues² numbers.
const MaxValues = 1000

// Rating is one rater's label of one unit: a number, a text category, or,
// as the zero Rating, no label at all. Ratings are comparable with ==.
type Rating struct {
	kind ratingKind
	num  float64
	text string
}

type ratingKind uint8

const (
	missing ratingKind = iota
	number
	text
)

// Number is a numeric label.
func Number(x float64) Rating {
	if x == 0 {
		x = 0 // -0 and 0 are one label
	}
	return Rating{kind: number, num: x}
}

// Text is a text label, a category.
func Text(s string) Rating { return Rating{kind: text, text: s} }

// Missing reports whether the rater gave no label.
func (r Rating) Missing() bool { return r.kind == missing }

// Float returns a numeric label's value, and false for text or missing.
func (r Rating) Float() (float64, bool) { return r.num, r.kind == number }

// String is the label as a person reads it; "" when missing.
func (r Rating) String() string {
	switch r.kind {
	case number:
		return strconv.FormatFloat(r.num, 'g', -1, 64)
	case text:
		return r.text
	}
	return ""
}

// MarshalJSON writes a number, a string or null.
func (r Rating) MarshalJSON() ([]byte, error) {
	switch r.kind {
	case number:
		return strconv.AppendFloat(nil, r.num, 'g', -1, 64), nil
	case text:
		return strconv.AppendQuote(nil, r.text), nil
	}
	return []byte("null"), nil
}

// compareRatings orders labels: numbers ascending, then texts.
func compareRatings(a, b Rating) int {
	if a.kind != b.kind {
		return cmp.Compare(a.kind, b.kind)
	}
	if a.kind == number {
		return cmp.Compare(a.num, b.num)
	}
	return cmp.Compare(a.text, b.text)
}

// Ratings is reliability data: Ratings[u][r] is rater r's label of unit u,
// the zero Rating where r did not label u. Every row has one entry per
// rater. Messages name units and raters by their index from 0.
type Ratings [][]Rating

// UnitError refuses one unit's labels; Unit is its row in the Ratings.
type UnitError struct {
	Unit   int
	Reason string
}

func (e *UnitError) Error() string { return fmt.Sprintf("unit %d: %s", e.Unit, e.Reason) }

// Unwrap makes a UnitError an ErrInvalid.
func (e *UnitError) Unwrap() error { return ErrInvalid }

// Reliability is an agreement figure with the counts behind it.
type Reliability struct {
	Metric string `json:"metric"`
	Level  Level  `json:"level"`
	// Value is the coefficient: 1 for perfect agreement, 0 for what chance
	// alone gives, negative for less.
	Value float64 `json:"value"`
	// Observed and Expected are, for the kappas, the observed agreement and
	// the agreement chance gives (Value = (Observed-Expected)/(1-Expected));
	// for alpha, the observed and expected disagreement
	// (Value = 1 - Observed/Expected).
	Observed float64 `json:"observed"`
	Expected float64 `json:"expected"`
	// Units are the units that entered the computation: those with labels
	// from two raters or more (both raters for Cohen's kappa).
	Units int `json:"units"`
	// Raters are the raters who gave at least one of those labels.
	Raters int `json:"raters"`
	// Pairable is the number of labels that entered the computation.
	Pairable int `json:"pairable_values"`
	// Values are the distinct labels among them, numbers ascending, then
	// texts; Counts[i] is how many of the labels are Values[i].
	Values []Rating `json:"values"`
	Counts []int    `json:"counts"`
	// Coincidences[i][j] counts the pairs of labels Values[i], Values[j]
	// given to one unit by two different raters, each unit's pairs
	// weighted 1/(labels-1) so that a unit counts as many times as it has
	// labels (Krippendorff's coincidence matrix; its row sums are Counts).
	Coincidences [][]float64 `json:"coincidences"`
	// Contingency[i][j], for Cohen's kappa only, counts the units the first
	// rater labelled Values[i] and the second Values[j].
	Contingency [][]int `json:"contingency,omitempty"`
}

// Cohen is Cohen's kappa (Cohen 1960) of the two raters of r, over
// the units both labelled; units one of them left out are skipped. Labels
// are nominal: numbers and texts are categories.
func Cohen(r Ratings) (Reliability, error) {
	if err := r.check(LevelNominal); err != nil {
		return Reliability{}, err
	}
	if raters := len(r[0]); raters != 2 {
		return Reliability{}, invalid("Cohen's kappa compares exactly 2 raters; the ratings have %d columns", raters)
	}
	var units [][]Rating
	for _, row := range r {
		if !row[0].Missing() && !row[1].Missing() {
			units = append(units, row)
		}
	}
	if len(units) < 2 {
		return Reliability{}, notEnough("Cohen's kappa needs at least 2 units labelled by both raters; these ratings have %d", len(units))
	}
	values, index, err := distinct(units)
	if err != nil {
		return Reliability{}, err
	}
	// The table and the kappa come from CohenKappa, the one implementation
	// of Cohen's formula: each label is passed as its zero-padded index, so
	// that its sorted categories are Values in order.
	a, b := make([]string, len(units)), make([]string, len(units))
	for k, row := range units {
		a[k] = fmt.Sprintf("%06d", index[row[0]])
		b[k] = fmt.Sprintf("%06d", index[row[1]])
	}
	ag, err := CohenKappa(a, b)
	if err != nil {
		return Reliability{}, err
	}
	coin, counts := coincidences(units, index, len(values))
	rel := Reliability{
		Metric: MetricCohenKappa, Level: LevelNominal, Value: ag.Kappa, Observed: ag.Observed, Expected: ag.Expected,
		Units: len(units), Raters: 2, Pairable: 2 * len(units),
		Values: values, Counts: counts, Coincidences: coin, Contingency: ag.Table,
	}
	return rel, finiteReliability(rel)
}

// Fleiss is Fleiss' kappa (Fleiss 1971) over the units of r, each of which
// must have the same number of labels, at least 2; which raters gave them
// may differ from unit to unit. Units with no label at all are skipped.
// Labels are nominal.
func Fleiss(r Ratings) (Reliability, error) {
	if err := r.check(LevelNominal); err != nil {
		return Reliability{}, err
	}
	var units [][]Rating
	var rows []int
	for u, row := range r {
		if labels := present(row); len(labels) > 0 {
			units = append(units, labels)
			rows = append(rows, u)
		}
	}
	if len(units) < 2 {
		return Reliability{}, notEnough("Fleiss' kappa needs at least 2 labelled units; these ratings have %d", len(units))
	}
	m := len(units[0])
	for i, labels := range units {
		if len(labels) != m {
			return Reliability{}, &UnitError{Unit: rows[i], Reason: fmt.Sprintf(
				"has %d labels where unit %d has %d: Fleiss' kappa needs the same number of labels for every unit", len(labels), rows[0], m)}
		}
	}
	if m < 2 {
		return Reliability{}, notEnough("every unit has 1 label; Fleiss' kappa needs at least 2 per unit")
	}
	values, index, err := distinct(units)
	if err != nil {
		return Reliability{}, err
	}
	coin, counts := coincidences(units, index, len(values))
	// P̄, the mean share of agreeing rater pairs per unit, is the
	// coincidence matrix's diagonal over the labels (Σ_u Σ_j n_uj(n_uj-1) /
	// (N·m·(m-1))); chance agreement is Σ_j p_j² with p_j the share of
	// labels in category j.
	n := float64(len(units) * m)
	observed, expected := 0.0, 0.0
	for j := range values {
		observed += coin[j][j] / n
		p := float64(counts[j]) / n
		expected += p * p
	}
	rel := Reliability{
		Metric: MetricFleissKappa, Level: LevelNominal, Observed: observed, Expected: expected,
		Units: len(units), Raters: raters(r, rows), Pairable: len(units) * m,
		Values: values, Counts: counts, Coincidences: coin,
	}
	if len(values) < 2 {
		return rel, notEnough("every label is %q: with one category Fleiss' kappa is undefined", values[0].String())
	}
	rel.Value = (observed - expected) / (1 - expected)
	return rel, finiteReliability(rel)
}

// Alpha is Krippendorff's alpha of r at the given level, following
// Krippendorff, "Computing Krippendorff's Alpha-Reliability" (2011): units
// with fewer than 2 labels are not pairable and left out, and
// α = 1 - D_o/D_e, the observed over the expected disagreement, both read
// from the coincidence matrix. Text labels are taken at the nominal level
// only, and negative numbers not at the ratio level.
func Alpha(r Ratings, level Level) (Reliability, error) {
	switch level {
	case LevelNominal, LevelOrdinal, LevelInterval, LevelRatio:
	default:
		return Reliability{}, invalid("level %q is not nominal, ordinal, interval or ratio", level)
	}
	if err := r.check(level); err != nil {
		return Reliability{}, err
	}
	var units [][]Rating
	var rows []int
	for u, row := range r {
		if labels := present(row); len(labels) >= 2 {
			units = append(units, labels)
			rows = append(rows, u)
		}
	}
	if len(units) < 2 {
		return Reliability{}, notEnough("alpha needs at least 2 units with labels from 2 raters or more; these ratings have %d", len(units))
	}
	values, index, err := distinct(units)
	if err != nil {
		return Reliability{}, err
	}
	coin, counts := coincidences(units, index, len(values))
	pairable := 0
	for _, c := range counts {
		pairable += c
	}
	rel := Reliability{
		Metric: MetricKrippendorffAlpha, Level: level,
		Units: len(units), Raters: raters(r, rows), Pairable: pairable,
		Values: values, Counts: counts, Coincidences: coin,
	}
	if len(values) < 2 {
		return rel, notEnough("every label is %q: with no variation alpha is undefined", values[0].String())
	}
	delta := difference(level, values, counts)
	n := float64(pairable)
	for c := range values {
		for k := range values {
			d := delta(c, k)
			rel.Observed += coin[c][k] * d
			rel.Expected += float64(counts[c]) * float64(counts[k]) * d
		}
	}
	rel.Observed /= n
	rel.Expected /= n * (n - 1)
	rel.Value = 1 - rel.Observed/rel.Expected
	return rel, finiteReliability(rel)
}

// finiteReliability refuses a reliability whose figures are not all real numbers:
// what the scaling of the labels cannot keep within float64 is invalid
// input, never a NaN answered as a result.
func finiteReliability(rel Reliability) error {
	if !allFinite(rel.Value, rel.Observed, rel.Expected) {
		return invalid("the labels' magnitudes give no finite %s; give numbers of a smaller range", rel.Metric)
	}
	return nil
}

// unitScale returns the values' numbers over the power of 2 at or above
// the largest magnitude among them: the division is exact (an exponent
// shift, so also for 2^1024, which float64 cannot hold), and brings every
// number into [-1, 1], so that differences and their squares neither
// overflow nor underflow. Text values are left at 0.
func unitScale(values []Rating) []float64 {
	top := 0.0
	for _, v := range values {
		if v.kind == number {
			top = max(top, math.Abs(v.num))
		}
	}
	_, exp := math.Frexp(top) // top = frac · 2^exp, frac in [0.5, 1); 0 gives exp 0
	out := make([]float64, len(values))
	for i, v := range values {
		out[i] = math.Ldexp(v.num, -exp)
	}
	return out
}

// difference is Krippendorff's squared difference δ²(c, k) between
// Values[c] and Values[k] at a level.
func difference(level Level, values []Rating, counts []int) func(c, k int) float64 {
	switch level {
	case LevelOrdinal:
		// The labels between c and k, counting the ends as halves: rank
		// distance by how the labels are used, not by their numbers.
		cum := make([]float64, len(counts)+1)
		for i, n := range counts {
			cum[i+1] = cum[i] + float64(n)
		}
		return func(c, k int) float64 {
			if c > k {
				c, k = k, c
			}
			d := cum[k+1] - cum[c] - float64(counts[c]+counts[k])/2
			return d * d
		}
	case LevelInterval:
		// Alpha is the same in any unit at this level: the differences are
		// taken on the values over their scale, which keeps labels near the
		// float64 limits (1e200 squared, 1e-320 squared) finite and nonzero.
		x := unitScale(values)
		return func(c, k int) float64 {
			d := x[c] - x[k]
			return d * d
		}
	case LevelRatio:
		x := unitScale(values)
		return func(c, k int) float64 {
			a, b := x[c], x[k]
			if a+b == 0 {
				return 0 // both 0
			}
			d := (a - b) / (a + b)
			return d * d
		}
	}
	return func(c, k int) float64 {
		if c == k {
			return 0
		}
		return 1
	}
}

// check refuses a matrix whose rows differ in length and labels the
// level does not take.
func (r Ratings) check(level Level) error {
	if len(r) == 0 || len(r[0]) == 0 {
		return notEnough("no units were rated")
	}
	for u, row := range r {
		if len(row) != len(r[0]) {
			return &UnitError{Unit: u, Reason: fmt.Sprintf(
				"has %d entries where unit 0 has %d: give one entry per rater, null where a rater gave no label", len(row), len(r[0]))}
		}
		for i, v := range row {
			switch {
			case v.kind == number && (math.IsNaN(v.num) || math.IsInf(v.num, 0)):
				return &UnitError{Unit: u, Reason: fmt.Sprintf("rater %d's label %v is not a finite number", i, v.num)}
			case v.kind == text && level != LevelNominal:
				return &UnitError{Unit: u, Reason: fmt.Sprintf("rater %d's label %q is text; %s labels must be numbers (text is nominal)", i, v.text, level)}
			case v.kind == number && level == LevelRatio && v.num < 0:
				return &UnitError{Unit: u, Reason: fmt.Sprintf("rater %d's label %v is negative; ratio labels count from 0", i, v.num)}
			}
		}
	}
	return nil
}

// present returns a row's labels, without the missing ones.
func present(row []Rating) []Rating {
	var out []Rating
	for _, v := range row {
		if !v.Missing() {
			out = append(out, v)
		}
	}
	return out
}

// raters counts the columns that labelled at least one of the rows.
func raters(r Ratings, rows []int) int {
	n := 0
	for i := range r[0] {
		for _, u := range rows {
			if !r[u][i].Missing() {
				n++
				break
			}
		}
	}
	return n
}

// distinct returns the labels used by the units, ordered, and each label's
// index among them.
func distinct(units [][]Rating) ([]Rating, map[Rating]int, error) {
	index := map[Rating]int{}
	for _, labels := range units {
		for _, v := range labels {
			if v.Missing() {
				continue
			}
			if _, ok := index[v]; !ok {
				if len(index) == MaxValues {
					return nil, nil, invalid("more than %d distinct labels", MaxValues)
				}
				index[v] = 0
			}
		}
	}
	values := make([]Rating, 0, len(index))
	for v := range index {
		values = append(values, v)
	}
	slices.SortFunc(values, compareRatings)
	for i, v := range values {
		index[v] = i
	}
	return values, index, nil
}

// coincidences is Krippendorff's coincidence matrix of the units' labels
// (missing ones skipped) and its row sums: each ordered pair of labels from
// two raters of a unit with m labels adds 1/(m-1), so a unit adds m in all.
func coincidences(units [][]Rating, index map[Rating]int, nValues int) ([][]float64, []int) {
	coin := make([][]float64, nValues)
	for i := range coin {
		coin[i] = make([]float64, nValues)
	}
	counts := make([]int, nValues)
	type group struct{ value, n int }
	var idx []int
	var groups []group
	for _, labels := range units {
		// The unit's labels as (value, how many) pairs, so that the pairs
		// are counted per distinct value.
		idx = idx[:0]
		for _, v := range labels {
			if !v.Missing() {
				idx = append(idx, index[v])
			}
		}
		m := len(idx)
		if m < 2 {
			continue
		}
		slices.Sort(idx)
		groups = groups[:0]
		for _, c := range idx {
			if len(groups) > 0 && groups[len(groups)-1].value == c {
				groups[len(groups)-1].n++
			} else {
				groups = append(groups, group{c, 1})
			}
		}
		w := 1 / float64(m-1)
		for _, g := range groups {
			counts[g.value] += g.n
			row := coin[g.value]
			for _, h := range groups {
				pairs := g.n * h.n
				if g.value == h.value {
					pairs = g.n * (g.n - 1)
				}
				row[h.value] += float64(pairs) * w
			}
		}
	}
	return coin, counts
}

package views

// scoreTitle is what hovering a score shows: how it was reached, or why
// there is none.
func scoreTitle(sc ScoreView) string {
	if sc.Invalid != "" {
		return sc.Label + ": not scored. " + sc.Invalid
	}
	if sc.Explanation != "" {
		return sc.Label + ": " + sc.Explanation
	}
	return sc.Label
}

// itemColumns is how many columns a run's items table has.
func itemColumns(m RunView) int {
	scores := len(m.Columns)
	if m.ScoreChips {
		scores = 1
	}
	return scores + 4
}

// emptyItems says why a run's items table is empty.
func emptyItems(m RunView) string {
	for _, f := range m.Filters {
		if f.Active && f.Key != "all" {
			return "No item here. Show all items to see the others."
		}
	}
	return "No item answered yet."
}

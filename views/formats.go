package views

import "github.com/curate/curate/internal/export"

// FormatsFor keeps the formats that fit a dataset of kind: a preference
// dataset is offered the formats that keep the rejected reply, and a
// dataset of single examples those that hold one, so a select never offers
// a format that would drop half of every pair or has nothing to fill in.
func FormatsFor(kind string, formats []string) []string {
	var out []string
	for _, name := range formats {
		f := export.Format(name)
		if (kind == string(export.KindPreference) && f.KeepsRejected()) || (kind != string(export.KindPreference) && f.Accepts(export.KindSFT)) {
			out = append(out, name)
		}
	}
	return out
}

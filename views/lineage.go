package views

// ItemPair is a pair built from a feedback item, listed on the item's page.
type ItemPair struct {
	URL    string
	Query  string
	Side   string // "chosen" or "rejected": the reply the item gave the pair
	Method string
	When   string
}

// VersionJob is a fine-tuning job trained on a frozen dataset version.
type VersionJob struct {
	URL     string
	Label   string // the provider and base model, with the job's suffix
	Status  string
	Started string
}

// ItemModel is a model version trained on data holding a feedback item:
// where the item went, and where that version serves now.
type ItemModel struct {
	URL, Label, Status string
	DatasetURL         string
	DatasetLabel       string
	Aliases            []string
}

package importfile

// Message is one turn of a conversation. Role is "user" or "assistant", the
// names the export formats use.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Roles of a Message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Pair is one preference: for the conversation Prompt (ending with the user
// turn being answered), the reply Chosen is preferred over Rejected.
type Pair struct {
	// System is the system prompt, where the format has one (TRL and
	// OpenAI preference files).
	System   string
	Prompt   []Message
	Chosen   string
	Rejected string
	// Strength is how clear the preference is, in (0, 1]: 1 for HH-RLHF
	// (a single binary judgement); for OASST, the rank gap divided by the
	// largest possible gap among the siblings.
	Strength float64
	// Line is the input line the pair came from.
	Line int
	// ExternalID identifies the pair across imports of the same data, so a
	// re-import can be recognised: "hh-rlhf:<sha256 of the line, 32 hex>"
	// or "oasst:<chosen message id>:<rejected message id>". TRL and OpenAI
	// files have none: their pairs are known again by their content.
	ExternalID string
	// ChosenExternalID and RejectedExternalID are the feedback items'
	// ExternalIDs of the two replies where the source has them (OASST).
	ChosenExternalID   string
	RejectedExternalID string
}

// Skip is an input record that was read but not imported, and why.
type Skip struct {
	Line   int
	Reason string
}

// Report sums up a read.
type Report struct {
	// Lines is the number of JSON lines read (blank lines not counted).
	Lines int
	// Pairs and Items count what was passed to the caller.
	Pairs int
	Items int
	// Skipped lists records left out, in input order.
	Skipped []Skip
}

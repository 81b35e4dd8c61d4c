package importfile

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Thumbs is the feedback type an OASST reply's votes map to.
type Thumbs string

// Thumbs values. NoThumbs is for replies without votes or with as many "+1"
// as "-1": they are still items (their rank may say more), and the caller
// stores them without a thumbs judgement.
const (
	ThumbsUp   Thumbs = "thumbs_up"
	ThumbsDown Thumbs = "thumbs_down"
	NoThumbs   Thumbs = ""
)

// OASSTItem is one assistant reply of an OASST tree, as a feedback item.
type OASSTItem struct {
	// ExternalID is "oasst:" + MessageID.
	ExternalID string
	MessageID  string
	ParentID   string
	TreeID     string
	// Prompt is the conversation from the tree's root to the message this
	// replies to, which is the last element (a user turn); the earlier
	// elements are context.
	Prompt   []Message
	Response string
	// Thumbs is ThumbsUp when the reply has more "+1" than "-1" votes,
	// ThumbsDown when it has more "-1", NoThumbs otherwise. Up and Down are
	// the vote counts.
	Thumbs   Thumbs
	Up, Down int
	// Rank is the reply's rank among its siblings (0 is best), nil when it
	// was not ranked.
	Rank *int
	// Siblings is the number of assistant replies to the same message,
	// this one included.
	Siblings  int
	ModelName string
	Lang      string
	Synthetic bool
	Line      int
}

// OASSTTree is what one input line (one message tree) yields.
type OASSTTree struct {
	ID    string
	Line  int
	Items []OASSTItem
	Pairs []Pair
}

// oasstMessage is a message as the OASST export writes it; fields whose
// value is null are left out there, so absent and zero must be told apart
// where it matters (rank, review_result).
type oasstMessage struct {
	MessageID    string         `json:"message_id"`
	ParentID     string         `json:"parent_id"`
	Text         string         `json:"text"`
	Role         string         `json:"role"`
	Lang         string         `json:"lang"`
	Rank         *int           `json:"rank"`
	Emojis       map[string]int `json:"emojis"`
	Synthetic    bool           `json:"synthetic"`
	ModelName    string         `json:"model_name"`
	Deleted      bool           `json:"deleted"`
	ReviewResult *bool          `json:"review_result"`
	Replies      []oasstMessage `json:"replies"`
}

type oasstTree struct {
	MessageTreeID string        `json:"message_tree_id"`
	Prompt        *oasstMessage `json:"prompt"`
}

// ReadOASST reads OpenAssistant message trees, one JSON tree per line
// ({"message_tree_id", "prompt": {..., "replies": [...]}} with replies
// nested), and passes each tree's feedback items and ranked pairs to fn.
//
// Every assistant reply becomes an OASSTItem. For every group of ranked
// assistant replies to the same message, every two replies of different
// rank become a Pair (the better one chosen) with Strength = rank gap /
// (distinct ranks - 1), so adjacent ranks among three replies give 0.5 and
// best against worst gives 1. Ranks are taken by their order, so a gap left
// by a skipped reply does not count.
//
// Deleted messages and messages that failed review (review_result false)
// are skipped with their whole subtree and listed in the Report, as are
// assistant replies with empty text. Fields this reader does not use are
// ignored: OASST exports differ in the extra fields they carry.
func ReadOASST(ctx context.Context, r io.Reader, fn func(OASSTTree) error) (Report, error) {
	var rep Report
	err := eachLine(ctx, r, func(line int, data []byte, last bool) error {
		rep.Lines++
		var in oasstTree
		if err := decodeLine(line, data, last, false, &in); err != nil {
			return err
		}
		switch {
		case in.Prompt == nil:
			return &LineError{line, fmt.Errorf(`field "prompt" is missing`)}
		case in.Prompt.Role != "prompter":
			return &LineError{line, fmt.Errorf("prompt: role is %q, want \"prompter\"", in.Prompt.Role)}
		}
		if reason := skipReason(in.Prompt); reason != "" {
			rep.Skipped = append(rep.Skipped, Skip{line, "tree " + in.MessageTreeID + ": prompt " + reason})
			return nil
		}
		w := oasstWalker{line: line, tree: OASSTTree{ID: in.MessageTreeID, Line: line}, report: &rep}
		if w.tree.ID == "" {
			w.tree.ID = in.Prompt.MessageID
		}
		if err := w.walk(in.Prompt, nil, "prompt"); err != nil {
			return &LineError{line, err}
		}
		if err := fn(w.tree); err != nil {
			return lineErr(line, err)
		}
		rep.Items += len(w.tree.Items)
		rep.Pairs += len(w.tree.Pairs)
		return nil
	})
	return rep, err
}

type oasstWalker struct {
	line   int
	tree   OASSTTree
	report *Report
}

var oasstRoles = map[string]string{"prompter": RoleUser, "assistant": RoleAssistant}

// walk visits m, whose conversation so far is path, and its replies. where
// locates m in the tree for error messages.
func (w *oasstWalker) walk(m *oasstMessage, path []Message, where string) error {
	if m.MessageID == "" {
		return fmt.Errorf("%s: message_id is missing", where)
	}
	// path is shared between siblings; clip its capacity so appending for
	// one reply never writes into another's.
	conv := append(slices.Clip(path), Message{Role: oasstRoles[m.Role], Content: m.Text})

	var kept []*oasstMessage
	for i := range m.Replies {
		c := &m.Replies[i]
		if reason := skipReason(c); reason != "" {
			w.report.Skipped = append(w.report.Skipped, Skip{w.line, fmt.Sprintf("message %s: %s", c.MessageID, reason)})
			continue
		}
		if _, ok := oasstRoles[c.Role]; !ok {
			return fmt.Errorf("%s.replies[%d]: role %q is neither prompter nor assistant", where, i, c.Role)
		}
		kept = append(kept, c)
	}

	siblings := 0
	for _, c := range kept {
		if c.Role == "assistant" {
			siblings++
		}
	}
	for _, c := range kept {
		if c.Role == "assistant" {
			w.tree.Items = append(w.tree.Items, w.item(c, m.MessageID, conv, siblings))
		}
	}
	w.pairs(kept, conv)

	for i := range m.Replies {
		c := &m.Replies[i]
		if !slices.Contains(kept, c) {
			continue
		}
		if err := w.walk(c, conv, fmt.Sprintf("%s.replies[%d]", where, i)); err != nil {
			return err
		}
	}
	return nil
}

func skipReason(m *oasstMessage) string {
	switch {
	case m.Deleted:
		return "deleted (with its replies)"
	case m.ReviewResult != nil && !*m.ReviewResult:
		return "failed review (with its replies)"
	case m.Role == "assistant" && strings.TrimSpace(m.Text) == "":
		return "empty assistant reply (with its replies)"
	}
	return ""
}

func (w *oasstWalker) item(m *oasstMessage, parentID string, prompt []Message, siblings int) OASSTItem {
	up, down := m.Emojis["+1"], m.Emojis["-1"]
	thumbs := NoThumbs
	switch {
	case up > down:
		thumbs = ThumbsUp
	case down > up:
		thumbs = ThumbsDown
	}
	return OASSTItem{
		ExternalID: "oasst:" + m.MessageID,
		MessageID:  m.MessageID,
		ParentID:   parentID,
		TreeID:     w.tree.ID,
		Prompt:     slices.Clone(prompt),
		Response:   m.Text,
		Thumbs:     thumbs,
		Up:         up,
		Down:       down,
		Rank:       m.Rank,
		Siblings:   siblings,
		ModelName:  m.ModelName,
		Lang:       m.Lang,
		Synthetic:  m.Synthetic,
		Line:       w.line,
	}
}

// pairs turns the ranked assistant replies among siblings into pairs.
func (w *oasstWalker) pairs(siblings []*oasstMessage, prompt []Message) {
	var ranked []*oasstMessage
	for _, c := range siblings {
		if c.Role == "assistant" && c.Rank != nil {
			ranked = append(ranked, c)
		}
	}
	if len(ranked) < 2 {
		return
	}
	slices.SortStableFunc(ranked, func(a, b *oasstMessage) int { return *a.Rank - *b.Rank })
	// position[i] is the index of ranked[i]'s rank among the distinct ranks.
	position := make([]int, len(ranked))
	for i := 1; i < len(ranked); i++ {
		position[i] = position[i-1]
		if *ranked[i].Rank != *ranked[i-1].Rank {
			position[i]++
		}
	}
	maxGap := position[len(ranked)-1]
	if maxGap == 0 {
		return
	}
	for i, better := range ranked {
		for j := i + 1; j < len(ranked); j++ {
			gap := position[j] - position[i]
			if gap == 0 {
				continue
			}
			worse := ranked[j]
			w.tree.Pairs = append(w.tree.Pairs, Pair{
				Prompt:             slices.Clone(prompt),
				Chosen:             better.Text,
				Rejected:           worse.Text,
				Strength:           float64(gap) / float64(maxGap),
				Line:               w.line,
				ExternalID:         "oasst:" + better.MessageID + ":" + worse.MessageID,
				ChosenExternalID:   "oasst:" + better.MessageID,
				RejectedExternalID: "oasst:" + worse.MessageID,
			})
		}
	}
}

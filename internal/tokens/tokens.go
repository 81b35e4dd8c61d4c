// Package tokens counts tokens the way OpenAI's fine-tuning tooling does, and
// knows which encoding and training context each base model uses.
//
// Counting follows num_tokens_from_messages from the OpenAI cookbook's
// chat fine-tuning data-preparation notebook: every message costs three tokens
// of framing plus the tokens of each of its values (role, content and name),
// a name costs one more, and three tokens prime the assistant's reply.
//
// The byte-pair tables are compiled into the binary (tiktoken-go-loader), so
// counting never reaches the network.
package tokens

import (
	"fmt"
	"sync"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// Encodings this package supports.
const (
	CL100K = "cl100k_base"
	O200K  = "o200k_base"
)

// Framing costs from the cookbook's num_tokens_from_messages.
const (
	tokensPerMessage = 3
	tokensPerName    = 1
)

// ReplyPriming is the tokens a conversation costs beyond its messages (the
// cue for the assistant's reply). It is counted once per conversation, so
// CountMessages(a+b) = CountMessages(a) + CountMessages(b) - ReplyPriming,
// which lets callers count a shared prompt once.
const ReplyPriming = 3

// The tiktoken library keeps its loader in a package variable; setting it once
// before the first encoding is built keeps every caller on the offline tables.
var offlineLoader sync.Once

func useOfflineLoader() {
	offlineLoader.Do(func() { tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader()) })
}

// Message is one chat message as the counter sees it. Name is optional.
type Message struct {
	Role    string
	Content string
	Name    string
}

// Counter counts tokens for one encoding. It is safe for concurrent use.
type Counter struct {
	encoding string
	tk       *tiktoken.Tiktoken
}

// New returns a counter for the named encoding (CL100K or O200K). Building
// one takes a few hundred milliseconds, so callers should keep and reuse it.
func New(encoding string) (*Counter, error) {
	switch encoding {
	case CL100K, O200K:
	default:
		return nil, fmt.Errorf("tokens: unknown encoding %q (want %s or %s)", encoding, CL100K, O200K)
	}
	useOfflineLoader()
	tk, err := tiktoken.GetEncoding(encoding)
	if err != nil {
		return nil, fmt.Errorf("tokens: load %s: %w", encoding, err)
	}
	return &Counter{encoding: encoding, tk: tk}, nil
}

// Encoding names the encoding this counter uses.
func (c *Counter) Encoding() string { return c.encoding }

// Count returns the number of tokens in text. Special-token markers such as
// "<|endoftext|>" are counted as ordinary text: training data is user content,
// and a marker inside it must neither panic nor be read as a control token.
func (c *Counter) Count(text string) int {
	return len(c.tk.EncodeOrdinary(text))
}

// CountMessages returns the tokens a conversation takes, framing included.
func (c *Counter) CountMessages(msgs []Message) int {
	total, _ := c.Conversation(msgs)
	return total
}

// CountAssistant returns the tokens in the assistant messages' content: the
// part of a conversation the model is trained to produce.
func (c *Counter) CountAssistant(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		if m.Role == "assistant" {
			n += c.Count(m.Content)
		}
	}
	return n
}

// Conversation returns CountMessages and CountAssistant together, encoding
// each text once (encoding dominates the cost of validating a dataset).
func (c *Counter) Conversation(msgs []Message) (total, assistant int) {
	total = ReplyPriming
	for _, m := range msgs {
		content := c.Count(m.Content)
		total += tokensPerMessage + c.Count(m.Role) + content
		if m.Name != "" {
			total += c.Count(m.Name) + tokensPerName
		}
		if m.Role == "assistant" {
			assistant += content
		}
	}
	return total, assistant
}

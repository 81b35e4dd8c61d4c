package importfile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The turn markers of the HH-RLHF transcript format.
const (
	hhHuman     = "\n\nHuman:"
	hhAssistant = "\n\nAssistant:"
)

type hhLine struct {
	Chosen   *string `json:"chosen"`
	Rejected *string `json:"rejected"`
}

// ReadHHRLHF reads Anthropic HH-RLHF lines, {"chosen": "...", "rejected":
// "..."}, each text a transcript of "\n\nHuman: " and "\n\nAssistant: "
// turns, and passes one Pair per line to fn.
//
// The prompt is the conversation both texts share: their longest common
// prefix, cut back to the start of the last "\n\nAssistant:" marker inside
// it. Cutting each text at its own last marker would be wrong where a reply
// itself contains "\n\nAssistant:" text. The replies are what follows that
// marker, less one leading space.
//
// Turns are kept as the file has them, two of one role in a row included
// (the harmless-base test split has a few); whether a format needs them
// merged is the exporter's concern.
//
// Lines whose chosen or rejected reply is empty (the text ends in
// "\n\nAssistant: "), whose two texts are identical, or which have no shared
// Human turn are skipped and listed in the Report with the reason. Fields
// other than chosen and rejected are refused, as a sign of a different file.
func ReadHHRLHF(ctx context.Context, r io.Reader, fn func(Pair) error) (Report, error) {
	var rep Report
	err := eachLine(ctx, r, func(line int, data []byte, last bool) error {
		rep.Lines++
		var in hhLine
		if err := decodeLine(line, data, last, true, &in); err != nil {
			return err
		}
		if in.Chosen == nil || in.Rejected == nil {
			missing := "chosen"
			if in.Chosen != nil {
				missing = "rejected"
			}
			return &LineError{line, fmt.Errorf("field %q is missing", missing)}
		}
		p, reason := splitHH(*in.Chosen, *in.Rejected)
		if reason != "" {
			rep.Skipped = append(rep.Skipped, Skip{line, reason})
			return nil
		}
		sum := sha256.Sum256(data)
		p.Line = line
		p.Strength = 1
		p.ExternalID = "hh-rlhf:" + hex.EncodeToString(sum[:16])
		if err := fn(p); err != nil {
			return lineErr(line, err)
		}
		rep.Pairs++
		return nil
	})
	return rep, err
}

// splitHH splits a chosen/rejected transcript pair into the shared prompt
// and the two replies, or says why it cannot.
func splitHH(chosen, rejected string) (Pair, string) {
	if chosen == rejected {
		return Pair{}, "chosen and rejected are identical"
	}
	n := 0
	for n < len(chosen) && n < len(rejected) && chosen[n] == rejected[n] {
		n++
	}
	cut := strings.LastIndex(chosen[:n], hhAssistant)
	if cut < 0 {
		return Pair{}, `chosen and rejected share no "\n\nAssistant:" turn`
	}
	prompt, err := parseHHTurns(chosen[:cut])
	if err != nil {
		return Pair{}, err.Error()
	}
	p := Pair{
		Prompt:   prompt,
		Chosen:   strings.TrimPrefix(chosen[cut+len(hhAssistant):], " "),
		Rejected: strings.TrimPrefix(rejected[cut+len(hhAssistant):], " "),
	}
	switch {
	case strings.TrimSpace(p.Chosen) == "":
		return Pair{}, "empty chosen reply"
	case strings.TrimSpace(p.Rejected) == "":
		return Pair{}, "empty rejected reply"
	}
	return p, ""
}

// parseHHTurns reads "\n\nHuman: ...\n\nAssistant: ..." into messages. The
// text must start with a Human turn.
func parseHHTurns(s string) ([]Message, error) {
	if !strings.HasPrefix(s, hhHuman) {
		return nil, errors.New(`the conversation does not start with "\n\nHuman:"`)
	}
	var msgs []Message
	for s != "" {
		role, marker := RoleUser, hhHuman
		if strings.HasPrefix(s, hhAssistant) {
			role, marker = RoleAssistant, hhAssistant
		}
		s = s[len(marker):]
		end := nextTurn(s)
		msgs = append(msgs, Message{Role: role, Content: strings.TrimPrefix(s[:end], " ")})
		s = s[end:]
	}
	return msgs, nil
}

// nextTurn returns the offset of the next turn marker in s, or len(s).
func nextTurn(s string) int {
	end := len(s)
	if i := strings.Index(s, hhHuman); i >= 0 {
		end = i
	}
	if i := strings.Index(s[:end], hhAssistant); i >= 0 {
		end = i
	}
	return end
}

// lineErr wraps an error from a caller's callback with the line number,
// unless it already carries one or is the context's.
func lineErr(line int, err error) error {
	var le *LineError
	if errors.As(err, &le) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &LineError{line, err}
}

package chat

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"time"

	"github.com/curate/curate/internal/outbound"
)

// Embeddings are the vectors of the texts asked for, in their order, and
// what the call used.
type Embeddings struct {
	Vectors      [][]float64
	PromptTokens int64
	Latency      time.Duration
	Tries        int
}

// ErrNotEmbeddings is a 200 answer that is not one finite vector per text.
var ErrNotEmbeddings = &AnswerError{"The answer was not one embedding for each text."}

// Embed asks the endpoint's embeddings API (POST {base}/embeddings, the
// OpenAI shape: {"model", "input": [...]}) for a vector of each text.
func (c *Client) Embed(ctx context.Context, model string, texts []string) (Embeddings, error) {
	payload, err := json.Marshal(struct {
		Model string   `json:"model"`
		Input []string `json:"input"`
	}{model, texts})
	if err != nil {
		return Embeddings{}, err
	}
	var out Embeddings
	out.Tries, out.Latency, err = c.post(ctx, "/embeddings", payload, func(resp *http.Response) error {
		return readEmbeddings(resp, len(texts), &out)
	})
	return out, err
}

func readEmbeddings(resp *http.Response, n int, out *Embeddings) error {
	if resp.StatusCode != http.StatusOK {
		return outbound.Status(resp)
	}
	defer resp.Body.Close()
	var w struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int64 `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&w); err != nil {
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		if errors.As(err, &syntax) || errors.As(err, &typ) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return ErrNotEmbeddings
		}
		return err
	}
	if len(w.Data) != n {
		return ErrNotEmbeddings
	}
	vecs := make([][]float64, n)
	for _, d := range w.Data {
		if d.Index < 0 || d.Index >= n || vecs[d.Index] != nil || len(d.Embedding) == 0 {
			return ErrNotEmbeddings
		}
		for _, x := range d.Embedding {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return ErrNotEmbeddings
			}
		}
		vecs[d.Index] = d.Embedding
	}
	out.Vectors, out.PromptTokens = vecs, w.Usage.PromptTokens
	return nil
}

// Package finetunetest gives fine-tuning tests a dataset source held in
// memory, which writes its versions with the production export writers.
package finetunetest

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/finetune"
)

// Source is a finetune.DataSource over versions added by a test; each
// version is the one version of a dataset of its own.
type Source struct {
	mu       sync.Mutex
	versions []stored
	prepares int
}

type stored struct {
	org   uuid.UUID
	v     finetune.Version
	sft   []export.SFTExample
	pref  []export.PrefExample
	valid int // how many examples at the end form the validation split
	tags  map[int][]string
}

// Tag gives the version's examples at the indices a tag, as a split tag
// on their feedback or pair would.
func (s *Source) Tag(id uuid.UUID, tag string, indices ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.versions {
		if s.versions[i].v.ID == id {
			if s.versions[i].tags == nil {
				s.versions[i].tags = map[int][]string{}
			}
			for _, n := range indices {
				s.versions[i].tags[n] = append(s.versions[i].tags[n], tag)
			}
		}
	}
}

// Tagged counts the training examples and gives the last user message of
// those tagged tag.
func (s *Source) Tagged(_ context.Context, org, id uuid.UUID, tag string) (prompts []string, total int, err error) {
	st, err := s.find(org, id)
	if err != nil {
		return nil, 0, err
	}
	total = len(st.sft) + len(st.pref) - st.valid
	for i := range total {
		if !slices.Contains(st.tags[i], tag) {
			continue
		}
		var msgs []export.Message
		if st.pref != nil {
			msgs = st.pref[i].Prompt
		} else {
			msgs = st.sft[i].Messages
		}
		prompts = append(prompts, export.LastUser(msgs))
	}
	return prompts, total, nil
}

// AddPref adds a version of preference pairs; the last valid pairs are
// the validation split.
func (s *Source) AddPref(org uuid.UUID, label string, pairs []export.PrefExample, valid int) finetune.Version {
	v := finetune.Version{ID: uuid.New(), DatasetID: uuid.New(), Label: label, Kind: export.KindPreference, Examples: len(pairs), Valid: true}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.versions = append([]stored{{org: org, v: v, pref: pairs, valid: valid}}, s.versions...)
	return v
}

// AddSFT adds a version of single examples.
func (s *Source) AddSFT(org uuid.UUID, label string, examples []export.SFTExample, valid int) finetune.Version {
	v := finetune.Version{ID: uuid.New(), DatasetID: uuid.New(), Label: label, Kind: export.KindSFT, Examples: len(examples), Valid: true}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.versions = append([]stored{{org: org, v: v, sft: examples, valid: valid}}, s.versions...)
	return v
}

// AddInvalid adds a version that failed validation.
func (s *Source) AddInvalid(org uuid.UUID, label, problem string) finetune.Version {
	v := finetune.Version{ID: uuid.New(), DatasetID: uuid.New(), Label: label, Kind: export.KindSFT, Problem: problem}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.versions = append([]stored{{org: org, v: v}}, s.versions...)
	return v
}

// ReplacePref replaces a version's pairs, standing in for a dataset
// writer whose output changed between two writes of the same version.
func (s *Source) ReplacePref(id uuid.UUID, pairs []export.PrefExample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.versions {
		if s.versions[i].v.ID == id {
			s.versions[i].pref = pairs
		}
	}
}

// Prepares counts calls to Prepare.
func (s *Source) Prepares() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.prepares
}

// Versions lists the organisation's versions, newest first.
func (s *Source) Versions(_ context.Context, org uuid.UUID) ([]finetune.Version, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []finetune.Version
	for _, st := range s.versions {
		if st.org == org {
			out = append(out, st.v)
		}
	}
	return out, nil
}

func (s *Source) find(org, id uuid.UUID) (stored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.versions {
		if st.org == org && st.v.ID == id {
			return st, nil
		}
	}
	return stored{}, errs.ErrNotFound
}

// Version describes one version.
func (s *Source) Version(_ context.Context, org, id uuid.UUID) (finetune.Version, error) {
	st, err := s.find(org, id)
	return st.v, err
}

// Latest describes the dataset's version.
func (s *Source) Latest(_ context.Context, org, datasetID uuid.UUID) (finetune.Version, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.versions {
		if st.org == org && st.v.DatasetID == datasetID {
			return st.v, nil
		}
	}
	return finetune.Version{}, errs.ErrNotFound
}

// Prepare writes train.jsonl and, when there is a validation split,
// valid.jsonl.
func (s *Source) Prepare(_ context.Context, org, id uuid.UUID, f export.Format, dir string) (finetune.Prepared, error) {
	st, err := s.find(org, id)
	if err != nil {
		return finetune.Prepared{}, err
	}
	s.mu.Lock()
	s.prepares++
	s.mu.Unlock()
	n := len(st.sft) + len(st.pref)
	write := func(name string, from, to int) (string, error) {
		path := filepath.Join(dir, name)
		file, err := os.Create(path)
		if err != nil {
			return "", err
		}
		defer file.Close()
		w, err := export.NewWriter(f, file, "")
		if err != nil {
			return "", err
		}
		for i := from; i < to; i++ {
			if st.pref != nil {
				err = w.WritePref(st.pref[i])
			} else {
				err = w.WriteSFT(st.sft[i])
			}
			if err != nil {
				return "", err
			}
		}
		if err := w.Close(); err != nil {
			return "", err
		}
		return path, file.Close()
	}
	p := finetune.Prepared{TrainExamples: n - st.valid}
	if p.TrainPath, err = write("train.jsonl", 0, n-st.valid); err != nil {
		return p, err
	}
	if st.valid > 0 {
		if p.ValidPath, err = write("valid.jsonl", n-st.valid, n); err != nil {
			return p, err
		}
	}
	return p, nil
}

// Pairs returns n small preference pairs. Each of their texts is one token
// in OpenAI's encodings, so tests can count by hand.
func Pairs(n int) []export.PrefExample {
	out := make([]export.PrefExample, n)
	for i := range out {
		out[i] = export.PrefExample{
			Prompt:   []export.Message{{Role: export.RoleUser, Content: "hello"}},
			Chosen:   "4",
			Rejected: "5",
		}
	}
	return out
}

// Chats returns n small single examples, one token per text.
func Chats(n int) []export.SFTExample {
	out := make([]export.SFTExample, n)
	for i := range out {
		out[i] = export.SFTExample{Messages: []export.Message{
			{Role: export.RoleUser, Content: "hello"}, {Role: export.RoleAssistant, Content: "hi"},
		}}
	}
	return out
}

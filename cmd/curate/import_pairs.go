package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/schollz/progressbar/v3"

	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/importfile"
	"github.com/curate/curate/internal/pairs"
)

// runPairImport imports a file of preference pairs (HH-RLHF, OASST ranked
// siblings, or Curate's own TRL or OpenAI preference export; plain or gzip)
// into the organisation, all or nothing, showing progress over the file's
// bytes, then prints what was stored, what was there already and what was
// skipped and why. With a dataset name it then makes a draft preference
// dataset of the file's pairs (see addToDataset) and prints its id.
func runPairImport(ctx context.Context, env *Env, d *database, orgSlug, kind, path, dataset string) error {
	if !slices.Contains(pairs.ImportKinds, kind) {
		return fmt.Errorf("--kind: must be one of %s, not %q", strings.Join(pairs.ImportKinds, ", "), kind)
	}
	// A name the dataset would refuse is refused before anything is stored.
	if dataset != "" && (strings.TrimSpace(dataset) == "" || utf8.RuneCountInString(strings.TrimSpace(dataset)) > datasets.MaxName) {
		return fmt.Errorf("--dataset: the name must be 1 to %d characters", datasets.MaxName)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	o, err := accounts.New(d.Pool).OrgBySlug(ctx, orgSlug)
	if err != nil {
		return cliError(err)
	}
	bar := progressbar.NewOptions64(fi.Size(),
		progressbar.OptionSetWriter(env.Stderr),
		progressbar.OptionSetDescription("importing pairs"),
		progressbar.OptionShowBytes(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(env.Stderr) }),
	)
	in := importfile.WithProgress(f, fi.Size(), func(read, _ int64) { _ = bar.Set64(read) })
	rep, err := (&pairs.Service{Pool: d.Pool}).Import(ctx, cliActor, o.ID, kind, in)
	if err != nil {
		_ = bar.Exit()
		fmt.Fprintln(env.Stderr)
		return fmt.Errorf("import of %s failed, nothing was stored: %w", filepath.Base(path), err)
	}
	_ = bar.Finish()
	fmt.Fprintf(env.Stdout, "imported %s pairs from %s into %s: %d stored, %d already there, %d skipped\n",
		kind, filepath.Base(path), o.Slug, rep.Created, rep.Duplicates, len(rep.Skipped))
	for _, s := range rep.Skipped {
		fmt.Fprintf(env.Stdout, "  line %d skipped: %s\n", s.Line, s.Reason)
	}
	if dataset == "" {
		return nil
	}
	return addToDataset(ctx, env, d, o.ID, dataset, rep.PairIDs)
}

// addToDataset makes a preference_pairs dataset holding the pairs (created
// as a draft; adding them starts curating, as on the pages) and prints its id. The pairs are every pair the file holds, those already
// stored included: a curator who names a dataset wants the file in it,
// whatever an earlier import of it stored.
func addToDataset(ctx context.Context, env *Env, d *database, orgID uuid.UUID, name string, ids []uuid.UUID) error {
	if len(ids) == 0 {
		return fmt.Errorf("--dataset: the file has no importable pairs, so no dataset %q was made", name)
	}
	svc := &datasets.Service{Pool: d.Pool}
	ds, err := svc.Create(ctx, cliActor, orgID, datasets.NewDataset{Type: datasets.TypePreferencePairs,
		Settings: datasets.Settings{Name: name}})
	if err != nil {
		return fmt.Errorf("the pairs are stored, but dataset %q was not made: %w", name, cliError(err))
	}
	added := 0
	for chunk := range slices.Chunk(ids, datasets.MaxIDs) {
		n, err := svc.AddMembers(ctx, cliActor, orgID, ds.ID, chunk)
		if err != nil {
			return fmt.Errorf("the pairs are stored, but dataset %s holds only %d of the file's %d pairs: %w",
				ds.ID, added, len(ids), cliError(err))
		}
		added += n
	}
	// Adding members starts curating; print the dataset as it now stands.
	got, err := svc.Get(ctx, orgID, ds.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "dataset %s %q (preference_pairs, %s) holds %d pairs\n", ds.ID, ds.Name, got.Dataset.Status, got.MemberCount)
	return nil
}

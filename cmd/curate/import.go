package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/schollz/progressbar/v3"

	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/imports"
)

func cmdImport(ctx context.Context, env *Env, args []string) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	fs := newFlags(env, "import", "import --org SLUG --kind "+strings.Join(imports.Kinds, "|")+" [--dataset NAME] FILE",
		"Imports a file into an organisation, as an upload on the Imports page does,\n"+
			"and prints what was stored, what was already there and what was skipped and why.\n"+
			"The whole file is checked first: a bad line stops the import with its number and\n"+
			"nothing is stored. Importing the same file again stores nothing new.\n\n"+
			"Feedback: jsonl (one feedback item per line, the shape POST /api/feedback takes),\n"+
			"oasst (OpenAssistant message trees, one per line), seed001 (seed 001's feedback_data\n"+
			"records) and seed004 (seed 004's rlhf_feedback rows), one record per line as the\n"+
			"seed stores it, kept on the dates it gives (timestamp, created_at). Plain or gzip.\n\n"+
			"Preference pairs: hh-rlhf (Anthropic HH-RLHF chosen/rejected transcripts),\n"+
			"oasst-pairs (OpenAssistant ranked siblings), trl and openai-preference (files\n"+
			"Curate exported, read back). With --dataset NAME the file's pairs also go into a\n"+
			"new preference_pairs dataset of that name, whose id is printed: every pair\n"+
			"the file holds, those this import stored and those already there (so importing\n"+
			"the same file again makes a new dataset with the same pairs and stores none).")
	org := fs.String("org", "", "organisation slug")
	kind := fs.String("kind", "", strings.Join(imports.Kinds, ", "))
	dataset := fs.String("dataset", "", "preference pairs only: also put the file's pairs into a new dataset of this name")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "data directory (CURATE_DATA_DIR)")
	// Flags may come before or after the file name.
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch {
	case *org == "" || *kind == "":
		return errors.New("--org and --kind are required")
	case !slices.Contains(imports.Kinds, *kind):
		return fmt.Errorf("--kind: must be one of %s, not %q", strings.Join(imports.Kinds, ", "), *kind)
	case len(files) != 1:
		return errors.New("give exactly one file to import")
	case *dataset != "" && !imports.IsPairKind(*kind):
		return fmt.Errorf("--dataset: a %s file holds feedback, not preference pairs; build an instruction dataset from it on the Datasets page or with the API", *kind)
	// A name the dataset would refuse is refused before anything is stored.
	case *dataset != "" && (strings.TrimSpace(*dataset) == "" || utf8.RuneCountInString(strings.TrimSpace(*dataset)) > datasets.MaxName):
		return fmt.Errorf("--dataset: the name must be 1 to %d characters", datasets.MaxName)
	}
	path := files[0]
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}

	svc, closeDB, err := openServices(ctx, cfg, env)
	if err != nil {
		return err
	}
	defer closeDB()
	o, err := svc.Accounts.OrgBySlug(ctx, *org)
	if err != nil {
		return cliError(err)
	}
	// The same run an upload gets, worked here on the file in place.
	run, err := svc.Imports.Start(ctx, cliActor, imports.NewRun{OrgID: o.ID, Kind: *kind, FileName: filepath.Base(path), Size: fi.Size()})
	if err != nil {
		return cliError(err)
	}

	// The file is read twice, to check it and to store it: the bar covers both.
	bar := progressbar.NewOptions64(2*fi.Size(),
		progressbar.OptionSetWriter(env.Stderr),
		progressbar.OptionSetDescription(imports.PhaseChecking),
		progressbar.OptionShowBytes(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(env.Stderr) }),
	)
	sum, err := svc.Imports.Run(ctx, o.ID, run.ID, path, func(p imports.Progress) {
		done := p.Done
		if p.Phase == imports.PhaseStoring {
			done += p.Total
		}
		bar.Describe(p.Phase)
		_ = bar.Set64(done)
	})
	if err != nil {
		_ = bar.Exit()
		fmt.Fprintln(env.Stderr)
		return fmt.Errorf("import of %s failed, nothing was stored: %w", filepath.Base(path), err)
	}
	_ = bar.Finish()

	if !imports.IsPairKind(*kind) {
		fmt.Fprintf(env.Stdout, "imported %s into %s: %d stored, %d already there, %d skipped\n",
			filepath.Base(path), o.Slug, sum.Stored, sum.Duplicates, sum.Skipped)
		reasons := make([]string, 0, len(sum.Reasons))
		for r := range sum.Reasons {
			reasons = append(reasons, r)
		}
		slices.Sort(reasons)
		for _, r := range reasons {
			fmt.Fprintf(env.Stdout, "  skipped %d: %s\n", sum.Reasons[r], r)
		}
		return nil
	}
	fmt.Fprintf(env.Stdout, "imported %s pairs from %s into %s: %d stored, %d already there, %d skipped\n",
		*kind, filepath.Base(path), o.Slug, sum.Stored, sum.Duplicates, sum.Skipped)
	for _, s := range sum.Skips {
		fmt.Fprintf(env.Stdout, "  line %d skipped: %s\n", s.Line, s.Reason)
	}
	if *dataset == "" {
		return nil
	}
	return addToDataset(ctx, env, svc.Datasets, o.ID, *dataset, sum.PairIDs)
}

// addToDataset makes a preference_pairs dataset holding the pairs (created
// as a draft; adding them starts curating, as on the pages) and prints its
// id. The pairs are every pair the file holds, those already stored
// included: a curator who names a dataset wants the file in it, whatever an
// earlier import of it stored.
func addToDataset(ctx context.Context, env *Env, svc *datasets.Service, orgID uuid.UUID, name string, ids []uuid.UUID) error {
	if len(ids) == 0 {
		return fmt.Errorf("--dataset: the file has no importable pairs, so no dataset %q was made", name)
	}
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

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

	"github.com/schollz/progressbar/v3"

	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/importer"
	"github.com/curate/curate/internal/pairs"
)

func cmdImport(ctx context.Context, env *Env, args []string) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	fs := newFlags(env, "import", "import --org SLUG --kind jsonl|oasst|hh-rlhf|oasst-pairs|trl|openai-preference [--dataset NAME] FILE",
		"Imports a feedback file into an organisation, as an upload on the Imports page does,\n"+
			"and prints what was stored, what was already there and what was skipped and why.\n"+
			"The whole file is checked first: a bad line stops the import with its number and\n"+
			"nothing is stored. Importing the same file again stores nothing new.\n\n"+
			"Kinds: jsonl (one feedback item per line, the shape POST /api/feedback takes),\n"+
			"oasst (OpenAssistant message trees, one per line). Plain or gzip.\n\n"+
			"Preference pairs: hh-rlhf (Anthropic HH-RLHF chosen/rejected transcripts),\n"+
			"oasst-pairs (OpenAssistant ranked siblings), trl and openai-preference (files\n"+
			"Curate exported, read back). With --dataset NAME the file's pairs also go into a\n"+
			"new preference_pairs dataset of that name, whose id is printed: every pair\n"+
			"the file holds, those this import stored and those already there (so importing\n"+
			"the same file again makes a new dataset with the same pairs and stores none).")
	org := fs.String("org", "", "organisation slug")
	kind := fs.String("kind", "", "jsonl, oasst, hh-rlhf, oasst-pairs, trl or openai-preference")
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
	case !slices.Contains(importer.Kinds, *kind) && !slices.Contains(pairs.ImportKinds, *kind):
		return fmt.Errorf("--kind: must be one of %s, not %q", strings.Join(append(slices.Clone(importer.Kinds), pairs.ImportKinds...), ", "), *kind)
	case len(files) != 1:
		return errors.New("give exactly one file to import")
	case *dataset != "" && !slices.Contains(pairs.ImportKinds, *kind):
		return fmt.Errorf("--dataset: a %s file holds feedback, not preference pairs; build an instruction dataset from it on the Datasets page or with the API", *kind)
	}
	path := files[0]
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}

	log := newLogger(cfg, env.Stderr)
	d, err := openDB(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer d.Close()
	if slices.Contains(pairs.ImportKinds, *kind) {
		return runPairImport(ctx, env, d, *org, *kind, path, *dataset)
	}
	o, err := accounts.New(d.Pool).OrgBySlug(ctx, *org)
	if err != nil {
		return cliError(err)
	}
	imp, err := importer.New(d.Pool, cfg, log)
	if err != nil {
		return err
	}
	run, err := imp.Start(ctx, cliActor, importer.NewRun{OrgID: o.ID, Kind: *kind, FileName: filepath.Base(path), Size: fi.Size()}, nil)
	if err != nil {
		return cliError(err)
	}

	// The file is read twice, to check it and to store it: the bar covers both.
	bar := progressbar.NewOptions64(2*fi.Size(),
		progressbar.OptionSetWriter(env.Stderr),
		progressbar.OptionSetDescription(importer.PhaseChecking),
		progressbar.OptionShowBytes(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(env.Stderr) }),
	)
	sum, err := imp.Run(ctx, o.ID, run.ID, path, func(p importer.Progress) {
		done := p.Done
		if p.Phase == importer.PhaseStoring {
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

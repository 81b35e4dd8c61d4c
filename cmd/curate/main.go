// Command curate is Curate's one binary: the web server, the background
// workers, migrations, a private development database and account tools.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/curate/curate/internal/imports"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	hard := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel() // first signal: shut down gracefully
		<-sigs
		close(hard) // second signal: cancel running jobs now
	}()
	env := &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Hard: hard}
	if err := run(ctx, env, os.Args[1:]); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "curate:", err)
		}
		os.Exit(1)
	}
}

// Env is the process's outside world, swappable in tests.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Hard           <-chan struct{} // closed on a second interrupt
}

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *Env, args []string) error
}

func commands() []command {
	return []command{
		{"serve", "run the web server and the background workers", cmdServe},
		{"worker", "run background workers only (scale out: more of these against one Postgres)", cmdWorker},
		{"migrate", "apply database migrations (Curate's and River's) and exit", cmdMigrate},
		{"devdb", "manage the private Postgres cluster in the data directory: start|stop|status|url", cmdDevDB},
		{"user", "manage users: create", cmdUser},
		{"apikey", "manage API keys: create", cmdAPIKey},
		{"dataset", "manage training datasets: freeze", cmdDataset},
		{"export", "write a ready dataset's export files to a directory", cmdExport},
		{"import", "import feedback (" + strings.Join(imports.FeedbackKinds, ", ") + ") or preference pairs (" +
			strings.Join(imports.PairKinds, ", ") + ") from a file into an organisation", cmdImport},
	}
}

func run(ctx context.Context, env *Env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(env.Stdout)
		if len(args) == 0 {
			return errors.New("a command is needed")
		}
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, env, args[1:])
		}
	}
	usage(env.Stderr)
	return fmt.Errorf("unknown command %q", args[0])
}

func usage(w io.Writer) {
	fmt.Fprint(w, `curate turns feedback on an AI assistant's answers into training data and better models.

Usage: curate <command> [flags]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Run "curate <command> --help" for a command's flags. Settings come from the
environment (CURATE_ADDR, CURATE_DATA_DIR, DATABASE_URL, ...; see README.md).
`)
}

// newFlags makes a command's flag set with a usage line that says what it does.
func newFlags(env *Env, name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, "Usage: curate %s\n\n%s\n", synopsis, about)
		var has bool
		fs.VisitAll(func(*flag.Flag) { has = true })
		if has {
			fmt.Fprintln(env.Stderr, "\nFlags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

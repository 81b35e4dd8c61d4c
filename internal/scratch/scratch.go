// Package scratch gives a process a private directory, inside the data
// directory, for the files it is still writing (an export's partial
// files), rather than the system's /tmp: the directory is 0700 and its
// files 0600.
//
// A process killed mid-write leaves its directory behind; the next process
// that opens scratch on the same data directory removes it. Several
// processes may share a data directory (serve and worker on one machine),
// so each holds a lock (flock) on its own directory for as long as it
// lives, and only directories nobody holds are removed: the kernel lets go
// of a dead process's lock, however it died.
package scratch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// Dir is one process's scratch directory under a root shared by the
// processes of a data directory.
type Dir struct {
	root string

	mu   sync.Mutex
	path string   // made on first use
	lock *os.File // the open directory, locked while path is ours
}

// prefix starts the name of every process directory. Only directories so
// named are ever removed, so a root that holds anything else (a data
// directory set to / makes root the system's /tmp) loses nothing else.
const prefix = "curate-scratch-"

// Open removes from root what processes that have ended left there, and
// returns this process's scratch. Its own directory (and root) is made on
// first use, so a process that writes nothing leaves nothing.
func Open(root string) (*Dir, error) {
	if err := sweep(root); err != nil {
		return nil, fmt.Errorf("clearing %s: %w", root, err)
	}
	return &Dir{root: root}, nil
}

// sweep removes the process directories under root that no live process
// holds: those whose lock can be taken.
func sweep(root string) error {
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		path := filepath.Join(root, e.Name())
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			continue // another process swept it first
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close() // a live process's
			continue
		}
		if err == nil {
			err = os.RemoveAll(path)
		}
		f.Close()
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CreateTemp creates a new file, mode 0600, in this process's directory
// (see os.CreateTemp for pattern). The caller removes it when done.
func (d *Dir) CreateTemp(pattern string) (*os.File, error) {
	dir, err := d.own()
	if err != nil {
		return nil, err
	}
	return os.CreateTemp(dir, pattern)
}

// own returns this process's directory, making and locking it the first
// time.
func (d *Dir) own() (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.path != "" {
		return d.path, nil
	}
	for {
		if err := os.MkdirAll(d.root, 0o700); err != nil {
			return "", fmt.Errorf("scratch directory: %w", err)
		}
		path, err := os.MkdirTemp(d.root, prefix)
		if err != nil {
			return "", fmt.Errorf("scratch directory: %w", err)
		}
		f, err := os.Open(path)
		if err != nil {
			return "", fmt.Errorf("scratch directory: %w", err)
		}
		// Blocking: a process starting at this moment may have taken the
		// new directory for a dead one in its sweep. It removes it and
		// lets go; then the directory is gone and another is made.
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return "", fmt.Errorf("locking %s: %w", path, err)
		}
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			f.Close()
			continue
		}
		d.path, d.lock = path, f
		return path, nil
	}
}

// Close removes this process's directory and what is left in it.
func (d *Dir) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lock == nil {
		return nil
	}
	err := os.RemoveAll(d.path)
	d.lock.Close()
	d.path, d.lock = "", nil
	return err
}

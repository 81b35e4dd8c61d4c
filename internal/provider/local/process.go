package local

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// tryLock opens path and takes an exclusive flock on it without waiting.
// ok is false when another open file holds the lock.
func tryLock(path string) (f *os.File, ok bool, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, true, nil
}

// alive reports whether a trainer holds the run's lock. A trainer, and
// every process it started that inherited the lock, counts until it exits.
func (r run) alive() (bool, error) {
	f, ok, err := tryLock(r.path(lockFile))
	if err != nil {
		return false, err
	}
	if !ok {
		return true, nil
	}
	f.Close()
	return false, nil
}

// startTicks reads a process's start time, in clock ticks after boot, from
// /proc/<pid>/stat (field 22). The command name in field 2 may hold spaces
// and parentheses, so fields are counted from its closing parenthesis.
func startTicks(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state), so field 22 is fields[19].
	if len(fields) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields)+2)
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// signalGroup sends sig to the trainer's process group. When the pid now
// belongs to a different process, the trainer and its group are gone (the
// kernel does not hand out a pid still used as a group id), so nothing is
// sent.
func signalGroup(rec pidRecord, sig syscall.Signal) error {
	if rec.PID <= 1 {
		return fmt.Errorf("trainer pid %d is not usable", rec.PID)
	}
	if ticks, err := startTicks(rec.PID); err == nil && ticks != rec.StartTicks {
		return nil
	}
	err := syscall.Kill(-rec.PID, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

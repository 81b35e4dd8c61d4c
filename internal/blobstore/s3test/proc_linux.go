package s3test

import "syscall"

// dieWithParent has the kernel kill the server when the test process ends
// without its cleanup (a timeout's panic, a kill), so no server outlives
// its test.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

//go:build !linux

package s3test

import "syscall"

// dieWithParent: only Linux can tie the server's life to the test
// process; elsewhere the cleanup alone stops it.
func dieWithParent() *syscall.SysProcAttr { return nil }

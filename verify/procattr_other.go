//go:build !unix

package verify

import "syscall"

func procAttr() *syscall.SysProcAttr { return nil }

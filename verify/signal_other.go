//go:build !unix

package verify

import (
	"errors"
	"os"
)

var errNoSignals = errors.New("verify: worker processes need a unix system")

func stopProcess(*os.Process) error      { return errNoSignals }
func continueProcess(*os.Process) error  { return errNoSignals }
func terminateProcess(*os.Process) error { return errNoSignals }

//go:build !linux

package mountns

import (
	"errors"
	"syscall"
)

// newNamespaceAttr: there are no mount namespaces outside Linux; Check
// fails there, and test/node with it.
func newNamespaceAttr() *syscall.SysProcAttr { return nil }

func supported() error { return errors.New("mount namespaces exist only on Linux") }

// Command pause is the sandbox ("pause") container of the real test node
// (test/realnode): it holds a Pod's namespaces open, reaps the zombies that
// end up with it as PID 1, and exits on SIGTERM or SIGINT, which is what
// the Kubernetes pause image does. It is built static and served by the
// node's registry as the image containerd's sandbox_image names.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}

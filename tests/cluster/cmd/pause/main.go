// SPDX-License-Identifier: Apache-2.0

// The pause program of the test cluster's sandbox image: it holds the pod's
// namespaces and waits until it is told to stop.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}

// Package k8stest runs cdiplug (a C daemon, built beforehand) against real
// Kubernetes code at one pinned release: the kubelet's device manager and
// DRA manager, the API server's validation and the CDI reference library.
// run.sh builds it once per release; see docs/HACKING.md.
package k8stest

import (
	"fmt"
	"os"
	"testing"
)

// cdiplugBin is the daemon under test (run.sh sets CDIPLUG).
var cdiplugBin = os.Getenv("CDIPLUG")

func TestMain(m *testing.M) {
	if cdiplugBin == "" {
		fmt.Fprintln(os.Stderr, "CDIPLUG must name the cdiplug binary (tests/k8s/run.sh sets it)")
		os.Exit(2)
	}
	os.Exit(m.Run())
}

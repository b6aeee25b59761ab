//go:build tools

// The containerd commands tests/cluster builds (cmd/containerd with its
// built-in plugins, CRI among them, and ctr to import the test images).
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)

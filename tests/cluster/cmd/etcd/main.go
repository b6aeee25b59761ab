// SPDX-License-Identifier: Apache-2.0

// The etcd server of the test cluster, built from go.etcd.io/etcd/server/v3
// at the release whose client k8s.io/kubernetes's go.mod uses.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}

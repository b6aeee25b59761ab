// SPDX-License-Identifier: Apache-2.0

// render prints the chart's objects as `helm template` does, with the real
// Helm in process, for tests that install the chart into a cluster
// (tests/cluster):
//
//	render CHART_DIR VALUES_FILE RELEASE_NAMESPACE KUBE_VERSION
package main

import (
	"fmt"
	"os"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: render CHART_DIR VALUES_FILE RELEASE_NAMESPACE KUBE_VERSION")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], os.Args[3], os.Args[4]); err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}

func run(dir, valuesFile, namespace, kubeVersion string) error {
	c, err := loader.Load(dir)
	if err != nil {
		return fmt.Errorf("load %s: %w", dir, err)
	}
	vals, err := chartutil.ReadValuesFile(valuesFile)
	if err != nil {
		return fmt.Errorf("values %s: %w", valuesFile, err)
	}
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return err
	}
	in := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	in.DryRun = true
	in.ClientOnly = true
	in.Replace = true
	in.ReleaseName = "cdiplug"
	in.Namespace = namespace
	in.KubeVersion = kv
	rel, err := in.Run(c, vals)
	if err != nil {
		return err
	}
	_, err = fmt.Print(rel.Manifest)
	return err
}

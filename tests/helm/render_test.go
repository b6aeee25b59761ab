// The real Helm, in process: the chart loaded as `helm` loads it, linted
// as `helm lint --strict` lints it and rendered as `helm template` renders
// it (an install with DryRun and ClientOnly, no cluster).
package helm

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/yaml"
)

// object is one Kubernetes object as JSON sees it (numbers are float64).
type object = map[string]any

// top is the source tree: CDIPLUG_TOP, or two folders up from here.
func top(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CDIPLUG_TOP")
	if dir == "" {
		dir = "../.."
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func chartDir(t *testing.T) string {
	return filepath.Join(top(t), "deploy", "helm", "cdiplug")
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir(t))
	if err != nil {
		t.Fatalf("helm cannot load the chart: %v", err)
	}
	return c
}

// values parses a values file's text as `helm -f` does.
func values(t *testing.T, text string) map[string]any {
	t.Helper()
	v, err := chartutil.ReadValues([]byte(text))
	if err != nil {
		t.Fatalf("values %q: %v", text, err)
	}
	return v
}

// lint runs `helm lint --strict --namespace NS` with the given values and
// fails the test on any warning or error. (Lint renders in Helm's lint
// mode, where a template's `fail` is only an INFO: render() is what
// refuses.)
func lint(t *testing.T, vals map[string]any, namespace string) {
	t.Helper()
	l := action.NewLint()
	l.Strict = true
	l.Namespace = namespace
	res := l.Run([]string{chartDir(t)}, vals)
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", m)
		} else {
			t.Logf("helm lint: %s", m)
		}
	}
	for _, err := range res.Errors {
		t.Errorf("helm lint: %v", err)
	}
}

// render runs `helm template cdiplug CHART --namespace NS` with the given
// values: the manifest text, or Helm's error.
func render(t *testing.T, vals map[string]any, namespace string) (string, error) {
	t.Helper()
	rel, err := install(t, vals, namespace)
	if err != nil {
		return "", err
	}
	return rel.Manifest, nil
}

// install: the release a client-only dry-run install makes, notes and all.
func install(t *testing.T, vals map[string]any, namespace string) (*release.Release, error) {
	t.Helper()
	cfg := &action.Configuration{Log: func(f string, a ...any) { t.Logf("helm: "+f, a...) }}
	in := action.NewInstall(cfg)
	in.DryRun = true
	in.ClientOnly = true
	in.Replace = true
	in.ReleaseName = "cdiplug"
	in.Namespace = namespace
	kv, err := chartutil.ParseKubeVersion("v1.34.0")
	if err != nil {
		t.Fatal(err)
	}
	in.KubeVersion = kv
	return in.Run(loadChart(t), vals)
}

// parseStream reads a YAML stream into objects, in Helm's install order
// for a chart's manifest (releaseutil sorts them by their file's name),
// dropping empty documents.
func parseStream(t *testing.T, text string) []object {
	t.Helper()
	docs := releaseutil.SplitManifests(text)
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []object
	for _, k := range keys {
		var o object
		if err := yaml.Unmarshal([]byte(docs[k]), &o); err != nil {
			t.Fatalf("document %s does not parse: %v\n%s", k, err, docs[k])
		}
		if len(o) > 0 {
			out = append(out, o)
		}
	}
	return out
}

// key names an object as kubectl does: Kind/name.
func key(o object) string {
	meta, _ := o["metadata"].(object)
	return fmt.Sprintf("%v/%v", o["kind"], meta["name"])
}

func byKey(t *testing.T, objs []object) map[string]object {
	t.Helper()
	m := map[string]object{}
	for _, o := range objs {
		k := key(o)
		if _, dup := m[k]; dup {
			t.Errorf("%s is made twice", k)
		}
		m[k] = o
	}
	return m
}

func kinds(objs []object) string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, key(o))
	}
	sort.Strings(ks)
	return strings.Join(ks, " ")
}

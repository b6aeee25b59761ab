// The chart's own promises: its version follows the project's, the default
// config is the one the packages ship, and the values `cdiplug manifests`
// refuses are refused, naming the value.
package helm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestChartVersionIsTheProjects(t *testing.T) {
	cmake, err := os.ReadFile(filepath.Join(top(t), "CMakeLists.txt"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`project\(\s*cdiplug\s+VERSION\s+([0-9.]+)`).FindSubmatch(cmake)
	if m == nil {
		t.Fatal("CMakeLists.txt has no project(cdiplug VERSION ...)")
	}
	want := string(m[1])
	c := loadChart(t)
	if c.Metadata.Version != want || c.Metadata.AppVersion != want {
		t.Errorf("deploy/helm/cdiplug/Chart.yaml: version %q, appVersion %q; the project is %q "+
			"(CMakeLists.txt): bump both", c.Metadata.Version, c.Metadata.AppVersion, want)
	}
}

func TestDefaultConfigIsThePackagesOne(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(top(t), "packaging", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want any
	if err := json.Unmarshal(text, &want); err != nil {
		t.Fatal(err)
	}
	if got := loadChart(t).Values["config"]; !reflect.DeepEqual(got, want) {
		t.Errorf("values.yaml config is %s, packaging/config.json %s", js(got), js(want))
	}
}

// With namespace.create false and no name, every namespaced object goes
// into the release's namespace and no Namespace is made.
func TestReleaseNamespace(t *testing.T) {
	vals := values(t, "namespace: {name: \"\", create: false}")
	vals["config"] = jsonValue(t, draConfig)
	lint(t, vals, "kube-devices")
	manifest, err := render(t, vals, "kube-devices")
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	for _, o := range parseStream(t, manifest) {
		ns := get(o, "metadata", "namespace")
		switch o["kind"] {
		case "Namespace":
			t.Errorf("a Namespace is made: %s", key(o))
		case "ClusterRole", "DeviceClass", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			if ns != nil {
				t.Errorf("%s is cluster-scoped but has namespace %v", key(o), ns)
			}
		case "ClusterRoleBinding":
			if s := get(o, "subjects", 0, "namespace"); s != "kube-devices" {
				t.Errorf("%s binds the service account of namespace %v", key(o), s)
			}
		default:
			if ns != "kube-devices" {
				t.Errorf("%s is in namespace %v, not the release's", key(o), ns)
			}
		}
	}
}

// celBreaker's resource name closes its CEL string literal: rendered as it
// was, the DeviceClass selected `... == "x" || true || "" == ""`, every
// device of every driver.
const celBreaker = `{"dra": {"driver": "cdiplug.example.com"}, "resources": [
	{"name": "example.com/x\" || true || \"", "match": [{"path": "/dev/fuse"}], "api": "dra"}]}`

// strconvQuote: a Go string as a YAML double-quoted scalar (JSON's quoting
// is YAML's).
func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Values the chart refuses, each with the words its message must hold;
// where `cdiplug manifests` can be given the same thing, it refuses too.
func TestRefusals(t *testing.T) {
	cases := []struct {
		name, values, config, namespace string
		want                            []string
		manifests                       []string // options to manifests; nil: not comparable
	}{
		{name: "namespace made and the release's", values: "namespace: {name: cdiplug}",
			namespace: "cdiplug", want: []string{"namespace.create", `"cdiplug"`}},
		{name: "namespace no DNS label", values: "namespace: {name: Devices_NS}",
			want: []string{"namespace.name", `"Devices_NS"`, "DNS label"}, config: draConfig,
			manifests: []string{"--namespace", "Devices_NS"}},
		{name: "relative kubelet root", values: "kubeletRoot: var/lib/kubelet",
			want: []string{"kubeletRoot", "absolute"}, config: draConfig,
			manifests: []string{"--kubelet-root", "var/lib/kubelet"}},
		{name: "image with a space", values: `image: {repository: "cdiplug x"}`,
			want: []string{"image", "space"}, config: draConfig,
			manifests: []string{"--image", "cdiplug x:0.1.0"}},
		{name: "metrics port", values: "metrics: {port: 70000}", want: []string{"metrics.port"}},
		// values.schema.json (whose messages name a value by its JSON
		// pointer): a misspelt key and a wrong type.
		{name: "misspelt value", values: "nodeselector: {a: b}", want: []string{"nodeselector"}},
		{name: "a string for a switch", values: "nfd: {enabled: \"yes\"}",
			want: []string{"/nfd/enabled", "boolean"}},
		// A string is the config's JSON (--set-file): one that is no
		// JSON object is refused, saying so.
		{name: "a config string that is no JSON object", values: "config: \"[1, 2]\"",
			want: []string{"config", "no JSON object"}},
		{name: "a config string that is no JSON", values: "config: \"resources: []\"",
			want: []string{"config", "no JSON object"}},
		{name: "a config that is neither object nor string", values: "config: [1, 2]",
			want: []string{"/config"}},
		// A resource name goes into the DeviceClass's CEL selector: one
		// holding '"' would make it match every device of every driver.
		// values.schema.json refuses it in an object, the template in a
		// string; `cdiplug manifests` refuses it too.
		{name: "a resource name that ends its CEL literal", config: celBreaker,
			want: []string{"/config/resources/0/name"}, manifests: []string{}},
		{name: "a resource name that ends its CEL literal, from a file",
			values: "config: " + strconvQuote(celBreaker),
			want:   []string{"config.resources[0].name", `must be <domain>/<name>`}},
		{name: "a reserved domain", config: `{"resources": [{"name": "kubernetes.io/fuse",
				"match": [{"path": "/dev/fuse"}]}]}`,
			want: []string{"/config/resources/0/name"}, manifests: []string{}},
		{name: "dra resource without a dra section",
			config: `{"resources": [{"name": "example.com/fuse", "match": [{"path": "/dev/fuse"}]},
				{"name": "example.com/kvm", "match": [{"path": "/dev/kvm"}], "api": "dra"}]}`,
			want: []string{"config.resources[1]", `"dra"`}},
		{name: "bad driver", config: `{"dra": {"driver": "cdiplug_example"}, "resources": []}`,
			want: []string{"config.dra.driver", "cdiplug_example"}},
		{name: "two resources, one DeviceClass name",
			config: `{"dra": {"driver": "cdiplug.example.com"}, "resources": [
				{"name": "example.com/a_b", "match": [{"path": "/dev/fuse"}], "api": "dra"},
				{"name": "example.com/a-b", "match": [{"path": "/dev/kvm"}], "api": "dra"}]}`,
			want:      []string{"config.resources[1]", `"example.com/a-b"`, "a-b.example.com"},
			manifests: []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vals := values(t, tc.values)
			if tc.config != "" {
				vals["config"] = jsonValue(t, tc.config)
			}
			ns := tc.namespace
			if ns == "" {
				ns = "default"
			}
			manifest, err := render(t, vals, ns)
			if err == nil {
				t.Fatalf("helm template renders it:\n%s", manifest)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
			if tc.manifests == nil {
				return
			}
			_, errOut, rc := manifests(t, tc.config, tc.manifests...)
			if rc != 2 {
				t.Errorf("cdiplug manifests accepts it (exit %d, want 2): %s", rc, errOut)
			}
		})
	}
}

// The notes `helm install` prints say where the pods are and, for the
// shipped config, that nothing is advertised yet.
func TestNotes(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		want         []string
	}{
		{"default", "", []string{"namespace cdiplug", "0 resources", "nothing is advertised",
			"kubectl -n cdiplug get pods -l app.kubernetes.io/name=cdiplug"}},
		{"dra", draConfig, []string{"4 resources (DRA driver cdiplug.example.com)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := values(t, "")
			if tc.config != "" {
				vals["config"] = jsonValue(t, tc.config)
			}
			rel, err := install(t, vals, "default")
			if err != nil {
				t.Fatalf("helm install --dry-run: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(rel.Info.Notes, w) {
					t.Errorf("the notes do not say %q:\n%s", w, rel.Info.Notes)
				}
			}
		})
	}
}

// The kubelet serves the device plugin API at /var/lib/kubelet/device-plugins
// whatever its --root-dir: with another kubeletRoot the chart still mounts
// that dir (for device plugins and DRA alike), and only plugins_registry,
// plugins and pod-resources move with the root.
func TestDevicePluginDirIgnoresKubeletRoot(t *testing.T) {
	for _, config := range []string{"", draConfig} {
		vals := values(t, "kubeletRoot: /var/lib/k0s/kubelet")
		if config != "" {
			vals["config"] = jsonValue(t, config)
		}
		manifest, err := render(t, vals, "default")
		if err != nil {
			t.Fatalf("helm template: %v", err)
		}
		ds := byKey(t, parseStream(t, manifest))["DaemonSet/cdiplug"]
		paths := map[string]string{}
		for _, v := range get(ds, "spec", "template", "spec", "volumes").([]any) {
			if p, ok := get(v, "hostPath", "path").(string); ok {
				paths[get(v, "name").(string)] = p
			}
		}
		want := map[string]string{"device-plugins": "/var/lib/kubelet/device-plugins",
			"pod-resources": "/var/lib/k0s/kubelet/pod-resources"}
		if config != "" {
			want["plugins-registry"] = "/var/lib/k0s/kubelet/plugins_registry"
			want["plugins"] = "/var/lib/k0s/kubelet/plugins"
		}
		for name, p := range want {
			if paths[name] != p {
				t.Errorf("dra %v: volume %s is %q, want %q", config != "", name, paths[name], p)
			}
		}
		for _, a := range get(ds, "spec", "template", "spec", "containers", 0, "args").([]any) {
			if s := a.(string); strings.HasPrefix(s, "--kubelet-dir=") &&
				s != "--kubelet-dir=/var/lib/kubelet/device-plugins" {
				t.Errorf("dra %v: %s", config != "", s)
			}
		}
	}
}

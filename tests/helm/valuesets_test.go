// Each value set: helm lint --strict, helm template, the offline checks of
// the objects it stands in for, and agreement with `cdiplug manifests`
// (DRA) or deploy/base (device plugins), once what the values change is
// applied to the reference.
package helm

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// draConfig holds what YAML would misread if quoted by hand (a quote, a
// ": ", a " #", a backslash, a tab), a name whose DeviceClass takes the
// hash fallback, and a device-plugin resource beside the DRA ones.
const draConfig = `{ "dra": { "driver": "cdiplug.example.com" },
  "resources": [
    { "name": "example.com/serial", "match": [ { "path": "/dev/ttyUSB*" } ], "api": "dra" },
    { "name": "example.com/Odd_Name", "match": [ { "path": "/dev/a: \"b\" #c\\d\te" } ],
      "api": "dra", "shares": 2 },
    { "name": "example.com/dots..dots", "match": [ { "path": "/dev/kvm" } ], "api": "dra" },
    { "name": "example.com/fuse", "match": [ { "path": "/dev/fuse" } ], "shares": 8 } ] }`

// labelsConfig selects nodes by name and by label (issue 30 item 3): the
// role then lists and watches nodes.
const labelsConfig = `{ "dra": { "driver": "cdiplug.example.com" },
  "resources": [
    { "name": "example.com/serial", "match": [ { "path": "/dev/ttyUSB*" } ], "api": "dra",
      "nodes": { "names": [ "edge-*" ] } },
    { "name": "example.com/kvm", "match": [ { "path": "/dev/kvm" } ], "api": "dra",
      "nodes": { "labels": { "example.com/rack": "a" } } },
    { "name": "example.com/fuse", "match": [ { "path": "/dev/fuse" } ] } ] }`

const nfdDir = "/etc/kubernetes/node-feature-discovery/features.d"

type valueSet struct {
	name   string
	values string // a values file
	config string // the config value, as JSON ("": the chart's default)
	// manifests: the options that give `cdiplug manifests` the same
	// namespace, image and kubelet root (DRA sets only).
	manifests []string
	// change applies to the reference what the values change in it.
	change func(t *testing.T, ref map[string]object)
	// extra: objects only the chart makes, asked for by the values.
	extra []string
	// unknownKey: the set is skipped when `cdiplug manifests` refuses
	// this key as unknown (a binary from before the key).
	unknownKey string
	// configText: the config given as a string holding its JSON, as
	// `--set-file config=config.json` gives it, not as an object.
	configText bool
}

var valueSets = []valueSet{
	{name: "default"},
	{
		name: "placement",
		values: `
tolerations: [{key: dedicated, operator: Equal, value: devices, effect: NoSchedule}]
nodeSelector: {example.com/devices: "true"}
resources: {requests: {cpu: 5m, memory: 8Mi}, limits: {cpu: 50m, memory: 32Mi}}
`,
		change: func(t *testing.T, ref map[string]object) {
			pod := podSpec(t, ref)
			pod["tolerations"] = []any{object{"key": "dedicated", "operator": "Equal",
				"value": "devices", "effect": "NoSchedule"}}
			// Helm merges a map value into the default one.
			pod["nodeSelector"] = object{"kubernetes.io/os": "linux", "example.com/devices": "true"}
			container(t, ref)["resources"] = object{
				"requests": object{"cpu": "5m", "memory": "8Mi"},
				"limits":   object{"cpu": "50m", "memory": "32Mi"}}
		},
	},
	{name: "nfd", values: "nfd: {enabled: true}", change: addNFD},
	{
		name: "dra",
		values: `
namespace: {name: devices}
image: {repository: registry.example.com/cdiplug, tag: "0.1.0-rc1"}
kubeletRoot: /var/lib/k0s/kubelet/
`,
		config: draConfig,
		manifests: []string{"--namespace", "devices", "--image",
			"registry.example.com/cdiplug:0.1.0-rc1", "--kubelet-root", "/var/lib/k0s/kubelet/"},
	},
	{
		name: "dra-metrics",
		values: `
metrics:
  port: 9100
  serviceMonitor: {enabled: true, labels: {release: prometheus}}
`,
		config: draConfig,
		change: func(t *testing.T, ref map[string]object) {
			c := container(t, ref)
			args := c["args"].([]any)
			for i, a := range args {
				if s, _ := a.(string); strings.HasPrefix(s, "--metrics-address=") {
					args[i] = "--metrics-address=$(POD_IP):9100"
				}
			}
			c["ports"].([]any)[0].(object)["containerPort"] = float64(9100)
			get(ref["DaemonSet/cdiplug"], "spec", "template", "metadata", "annotations").(object)["prometheus.io/port"] = "9100"
		},
		extra: []string{"Service/cdiplug-metrics", "ServiceMonitor/cdiplug"},
	},
	{name: "dra-nfd", values: "nfd: {enabled: true}", config: draConfig, change: addNFD},
	// --set-file config=config.json, as operators of NVIDIA's chart give
	// theirs: the same objects as the config given as an object.
	{name: "dra-set-file", config: draConfig, configText: true},
	{name: "dra-node-labels", config: labelsConfig, unknownKey: "resources[0].nodes: unknown key"},
}

func podSpec(t *testing.T, ref map[string]object) object {
	t.Helper()
	pod, ok := get(ref["DaemonSet/cdiplug"], "spec", "template", "spec").(object)
	if !ok {
		t.Fatal("the reference has no DaemonSet/cdiplug")
	}
	return pod
}

func container(t *testing.T, ref map[string]object) object {
	t.Helper()
	return podSpec(t, ref)["containers"].([]any)[0].(object)
}

// addNFD: NFD's features.d mounted writable at its host path, and named.
func addNFD(t *testing.T, ref map[string]object) {
	c := container(t, ref)
	c["args"] = append(c["args"].([]any), "--nfd-features-dir="+nfdDir)
	c["volumeMounts"] = append(c["volumeMounts"].([]any),
		object{"name": "nfd-features", "mountPath": nfdDir})
	pod := podSpec(t, ref)
	pod["volumes"] = append(pod["volumes"].([]any), object{"name": "nfd-features",
		"hostPath": object{"path": nfdDir, "type": "DirectoryOrCreate"}})
}

// setValues: the set's values file with its config.
func setValues(t *testing.T, vs valueSet) map[string]any {
	t.Helper()
	vals := values(t, vs.values)
	if vs.configText {
		vals["config"] = vs.config
	} else if vs.config != "" {
		vals["config"] = jsonValue(t, vs.config)
	}
	return vals
}

// jsonValue: a config's JSON as a value, as --set-json gives it.
func jsonValue(t *testing.T, text string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("%v: %s", err, text)
	}
	return v
}

func TestValueSets(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			dra := vs.config != ""
			var refObjs []object
			if dra {
				objs, errOut, rc := manifests(t, vs.config, vs.manifests...)
				if rc == 2 && vs.unknownKey != "" && strings.Contains(errOut, vs.unknownKey) {
					t.Skipf("this cdiplug predates the key: %s", errOut)
				}
				if rc != 0 {
					t.Fatalf("cdiplug manifests: exit %d: %s", rc, errOut)
				}
				refObjs = objs
			} else {
				refObjs = base(t)
			}

			vals := setValues(t, vs)
			lint(t, vals, "default")
			manifest, err := render(t, vals, "default")
			if err != nil {
				t.Fatalf("helm template: %v", err)
			}
			validate(t, manifest, dra)
			objs := parseStream(t, manifest)
			typed(t, objs)
			got := byKey(t, objs)
			ref := byKey(t, refObjs)
			if vs.change != nil {
				vs.change(t, ref)
			}
			aheadOfReference(t, ref, got)
			for k, o := range ref {
				g, ok := got[k]
				if !ok {
					t.Errorf("the chart does not make %s (the reference makes %s)", k, kinds(refObjs))
					continue
				}
				agree(t, o, g)
			}
			extra := map[string]bool{}
			for _, k := range vs.extra {
				extra[k] = true
				if _, ok := got[k]; !ok {
					t.Errorf("the values ask for %s; the chart does not make it", k)
				}
			}
			for k := range got {
				if _, ok := ref[k]; !ok && !extra[k] {
					t.Errorf("the chart makes %s, which the reference does not", k)
				}
			}
		})
	}
}

// aheadOfReference: issue 29 has `cdiplug manifests` and deploy/base gain
// a rolling update that starts the new pod first (maxSurge 1,
// maxUnavailable 0) with the pod's UID from the downward API, and the
// manifests the ResourceSlice admission policy; the chart has them
// already. Until the reference has each, the comparison leaves that one
// out, saying so; once it has it, the two must agree.
func aheadOfReference(t *testing.T, ref, got map[string]object) {
	t.Helper()
	ds, chartDS := ref["DaemonSet/cdiplug"], got["DaemonSet/cdiplug"]
	if ds == nil || chartDS == nil {
		return
	}
	if get(ds, "spec", "updateStrategy", "rollingUpdate", "maxSurge") == nil {
		t.Logf("NOTE: the reference has no maxSurge yet: the updateStrategy is not compared")
		ds["spec"].(object)["updateStrategy"] = deepCopy(get(chartDS, "spec", "updateStrategy"))
	}
	env := get(ds, "spec", "template", "spec", "containers", 0, "env").([]any)
	hasUID := false
	for _, e := range env {
		hasUID = hasUID || get(e, "name") == "POD_UID"
	}
	if !hasUID {
		t.Logf("NOTE: the reference has no POD_UID yet: the chart's is not compared")
		for _, e := range get(chartDS, "spec", "template", "spec", "containers", 0, "env").([]any) {
			if get(e, "name") == "POD_UID" {
				ds["spec"].(object)["template"].(object)["spec"].(object)["containers"].([]any)[0].(object)["env"] = append(env, deepCopy(e))
			}
		}
	}
	hasPolicy := false
	for k := range ref {
		hasPolicy = hasPolicy || strings.HasPrefix(k, "ValidatingAdmissionPolicy")
	}
	if !hasPolicy && get(ds, "spec", "template", "spec", "serviceAccountName") != nil {
		t.Logf("NOTE: cdiplug manifests has no admission policy yet: the chart's is checked alone")
		for k, o := range got {
			if strings.HasPrefix(k, "ValidatingAdmissionPolicy") {
				ref[k] = deepCopy(o).(object)
			}
		}
	}
}

// typed decodes every object into its API type (client-go's scheme, the
// release Helm pins), refusing unknown fields; only the Prometheus
// operator's ServiceMonitor has no type there.
func typed(t *testing.T, objs []object) {
	t.Helper()
	for _, o := range objs {
		gvk := schema.FromAPIVersionAndKind(str(o["apiVersion"]), str(o["kind"]))
		into, err := scheme.Scheme.New(gvk)
		if err != nil {
			if gvk.Group == "monitoring.coreos.com" {
				continue
			}
			t.Errorf("%s: %s is no API type: %v", key(o), gvk, err)
			continue
		}
		strictDecode(t, o, into)
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

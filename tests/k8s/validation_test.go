package k8stest

// Every object `cdiplug manifests` prints, created as the API server creates
// it: decoded strictly into its versioned type, defaulted, converted to the
// internal type with the API server's scheme and passed through
// rest.BeforeCreate with the registry's strategy for its kind (the kind's
// own validation, ObjectMeta's, and declarative validation where the
// release has it). The ResourceSlices cdiplug writes go through the same
// path in the test API server (apiserver_test.go).

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/admissionregistration/install"
	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/rbac/install"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/validatingadmissionpolicy"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/validatingadmissionpolicybinding"
	"k8s.io/kubernetes/pkg/registry/apps/daemonset"
	"k8s.io/kubernetes/pkg/registry/core/configmap"
	"k8s.io/kubernetes/pkg/registry/core/namespace"
	"k8s.io/kubernetes/pkg/registry/core/serviceaccount"
	"k8s.io/kubernetes/pkg/registry/rbac/clusterrole"
	"k8s.io/kubernetes/pkg/registry/rbac/clusterrolebinding"
	"k8s.io/kubernetes/pkg/registry/rbac/role"
	"k8s.io/kubernetes/pkg/registry/rbac/rolebinding"
	"k8s.io/kubernetes/pkg/registry/resource/deviceclass"
)

// createStrategies are the API server's create strategies by kind. The
// admission policy strategies' authorizer and resolvers serve the
// authorization of a policy's parameters at write time, which is not
// validation: none is given.
var createStrategies = map[schema.GroupKind]rest.RESTCreateStrategy{
	{Kind: "Namespace"}:                                                               namespace.Strategy,
	{Kind: "ServiceAccount"}:                                                          serviceaccount.Strategy,
	{Kind: "ConfigMap"}:                                                               configmap.Strategy,
	{Group: "apps", Kind: "DaemonSet"}:                                                daemonset.Strategy,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         clusterrole.Strategy,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  clusterrolebinding.Strategy,
	{Group: "rbac.authorization.k8s.io", Kind: "Role"}:                                role.Strategy,
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}:                         rolebinding.Strategy,
	{Group: "resource.k8s.io", Kind: "DeviceClass"}:                                   deviceclass.Strategy,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        validatingadmissionpolicy.NewStrategy(nil, nil),
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: validatingadmissionpolicybinding.NewStrategy(nil, nil, nil),
}

// manifestObjects runs cdiplug manifests and splits what it prints into
// its documents.
func manifestObjects(t *testing.T, config string, args ...string) [][]byte {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(cdiplugBin, append([]string{"manifests", "--config", cfg}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("cdiplug manifests: %v\n%s", err, errb.String())
	}
	var docs [][]byte
	for _, d := range strings.Split(out.String(), "\n---") {
		if d = strings.TrimSpace(strings.TrimPrefix(d, "---")); d != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

// admitManifest creates one printed object as the API server would and
// returns its kind and the error the server would answer.
func admitManifest(doc []byte) (schema.GroupVersionKind, error) {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(doc, &tm); err != nil {
		return schema.GroupVersionKind{}, err
	}
	gvk := tm.GroupVersionKind()
	strategy, ok := createStrategies[gvk.GroupKind()]
	if !ok {
		return gvk, errNoStrategy
	}
	sc := legacyscheme.Scheme
	versioned, err := sc.New(gvk)
	if err != nil {
		return gvk, err
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(versioned); err != nil {
		return gvk, err
	}
	sc.Default(versioned)
	internal, err := sc.New(gvk.GroupKind().WithVersion(runtime.APIVersionInternal))
	if err != nil {
		return gvk, err
	}
	if err := sc.Convert(versioned, internal, nil); err != nil {
		return gvk, err
	}
	m, err := metaOf(internal)
	if err != nil {
		return gvk, err
	}
	rest.FillObjectMetaSystemFields(m)
	ctx := genericapirequest.WithNamespace(context.Background(), m.GetNamespace())
	ctx = genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
		IsResourceRequest: true, Verb: "create", APIGroup: gvk.Group, APIVersion: gvk.Version,
		Namespace: m.GetNamespace(), Name: m.GetName(),
	})
	return gvk, rest.BeforeCreate(strategy, ctx, internal)
}

type noStrategy struct{}

func (noStrategy) Error() string {
	return "a kind this test does not know the API server's strategy for: add it to createStrategies"
}

var errNoStrategy error = noStrategy{}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	a, ok := obj.(metav1.Object)
	if !ok {
		return nil, noStrategy{}
	}
	return a, nil
}

func TestManifestsPassTheAPIServersValidation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		config string
		args   []string
		// kinds that must be among the objects printed
		want []string
	}{
		{"DRA and device plugins", draConfig, nil,
			[]string{"Namespace", "ServiceAccount", "ConfigMap", "DaemonSet", "ClusterRole", "ClusterRoleBinding", "DeviceClass"}},
		{"another namespace and image", draConfig, []string{"--namespace", "devices", "--image", "registry.example.com/cdiplug:1.2.3"},
			[]string{"ServiceAccount", "ConfigMap", "DaemonSet", "DeviceClass"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			seen := map[string]bool{}
			for i, doc := range manifestObjects(t, c.config, c.args...) {
				gvk, err := admitManifest(doc)
				seen[gvk.Kind] = true
				if err != nil {
					t.Errorf("object %d (%s) is refused by the API server: %v\n%s", i, gvk, err, doc)
				}
			}
			for _, k := range c.want {
				if !seen[k] {
					t.Errorf("cdiplug manifests prints no %s (printed %v)", k, seen)
				}
			}
		})
	}
}

// The path above refuses what the API server refuses, so its passing
// means something.
func TestManifestValidationRefusesAnInvalidObject(t *testing.T) {
	bad := []string{
		`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"Not_A_Label"}}`,
		`{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"sa"}}`, // namespaced, no namespace
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"r"},"rules":[{"apiGroups":[""],"resources":["nodes"]}]}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"n"},"data":{"bad key!":"x"}}`,
	}
	for _, doc := range bad {
		if gvk, err := admitManifest([]byte(doc)); err == nil {
			t.Errorf("%s is accepted: %s", gvk, doc)
		}
	}
}

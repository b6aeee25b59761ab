// The chart's ValidatingAdmissionPolicy, compiled and evaluated in the API
// server's own CEL environment for admission (k8s.io/apiserver, at the
// release Helm pins), for the requests a node's cdiplug pod, or anyone
// else, could make. The validating-policy plugin itself (its dispatcher and
// informers) is left out: it would double this module's build for the
// decision "every match condition true, then every validation true",
// written out in admits().
package helm

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	celgo "github.com/google/cel-go/cel"
	celtypes "github.com/google/cel-go/common/types"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
)

const nodeNameExtra = "authentication.kubernetes.io/node-name"

var (
	sliceGVR = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceslices"}
	sliceGVK = schema.GroupVersionKind{Group: "resource.k8s.io", Version: "v1", Kind: "ResourceSlice"}
)

// strictDecode decodes a rendered object into an API type, refusing a
// field the type does not have, as `kubectl apply --validate=strict` does.
func strictDecode(t *testing.T, o object, into any) {
	t.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		t.Fatalf("%s: %v", key(o), err)
	}
}

// expr is one CEL expression of the policy, named when it is a variable,
// with the type the API server wants it to return.
type expr struct {
	name, text string
	returns    *celgo.Type
}

func (e *expr) GetName() string            { return e.name }
func (e *expr) GetExpression() string      { return e.text }
func (e *expr) ReturnTypes() []*celgo.Type { return []*celgo.Type{e.returns} }

// policy: the compiled match conditions and validations of a
// ValidatingAdmissionPolicy, its variables stored in the compiler as the
// API server's validating-policy plugin stores them.
type policy struct {
	match, checks plugincel.ConditionEvaluator
}

// compilePolicy compiles every expression in the API server's base CEL
// environment; a compile error, or an expression of the wrong type, fails
// the test.
func compilePolicy(t *testing.T, p *admissionregv1.ValidatingAdmissionPolicy) policy {
	t.Helper()
	comp, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		t.Fatal(err)
	}
	decls := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	for _, v := range p.Spec.Variables {
		res := comp.CompileAndStoreVariable(&expr{name: v.Name, text: v.Expression, returns: celgo.AnyType},
			decls, environment.StoredExpressions)
		if res.Error != nil {
			t.Fatalf("variable %s does not compile: %v", v.Name, res.Error)
		}
	}
	var match, checks []plugincel.ExpressionAccessor
	for _, m := range p.Spec.MatchConditions {
		match = append(match, &expr{text: m.Expression, returns: celgo.BoolType})
	}
	for _, v := range p.Spec.Validations {
		checks = append(checks, &expr{text: v.Expression, returns: celgo.BoolType})
		if v.MessageExpression != "" {
			checks = append(checks, &expr{text: v.MessageExpression, returns: celgo.StringType})
		}
	}
	for _, e := range append(append([]plugincel.ExpressionAccessor{}, match...), checks...) {
		res := comp.CompileCELExpression(e, decls, environment.StoredExpressions)
		if res.Error != nil {
			t.Fatalf("%q does not compile: %v", e.GetExpression(), res.Error)
		}
	}
	return policy{
		match:  comp.CompileCondition(match, decls, environment.StoredExpressions),
		checks: comp.CompileCondition(checks, decls, environment.StoredExpressions),
	}
}

// admits evaluates the policy on a request: false, with why, when a
// validation is not true; an evaluation error fails the test (the policy
// fails closed, but an error is no answer).
func (p policy) admits(t *testing.T, attr *admission.VersionedAttributes) (bool, string) {
	t.Helper()
	req := plugincel.CreateAdmissionRequest(attr.Attributes, metav1.GroupVersionResource(sliceGVR),
		metav1.GroupVersionKind(sliceGVK))
	eval := func(c plugincel.ConditionEvaluator) []plugincel.EvaluationResult {
		res, _, err := c.ForInput(context.Background(), attr, req, plugincel.OptionalVariableBindings{},
			nil, celconfig.RuntimeCELCostBudget)
		if err != nil {
			t.Fatalf("evaluation: %v", err)
		}
		for _, r := range res {
			if r.Error != nil {
				t.Errorf("%q: %v", r.ExpressionAccessor.GetExpression(), r.Error)
			}
		}
		return res
	}
	for _, r := range eval(p.match) {
		if r.EvalResult != celtypes.True {
			return true, "" // not a request the policy is about
		}
	}
	for _, r := range eval(p.checks) {
		if r.EvalResult == nil {
			return false, r.ExpressionAccessor.GetExpression() // an error, reported above
		}
		if r.EvalResult.Type() == celtypes.StringType {
			continue // a messageExpression: it only has to evaluate
		}
		if r.EvalResult != celtypes.True {
			return false, r.ExpressionAccessor.GetExpression()
		}
	}
	return true, ""
}

func slice(node, driver string) *unstructured.Unstructured {
	spec := map[string]any{"driver": driver, "pool": map[string]any{"name": node,
		"generation": int64(1), "resourceSliceCount": int64(1)}}
	if node != "" {
		spec["nodeName"] = node
	} else {
		spec["allNodes"] = true
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
		"metadata": map[string]any{"name": node + "-" + strings.ReplaceAll(driver, ".", "-")},
		"spec":     spec}}
}

func TestAdmissionPolicy(t *testing.T) {
	vals := values(t, "namespace: {name: devices}")
	vals["config"] = jsonValue(t, draConfig)
	manifest, err := render(t, vals, "default")
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	objs := byKey(t, parseStream(t, manifest))
	var policy admissionregv1.ValidatingAdmissionPolicy
	var binding admissionregv1.ValidatingAdmissionPolicyBinding
	strictDecode(t, objs["ValidatingAdmissionPolicy/cdiplug-dra-node-devices"], &policy)
	strictDecode(t, objs["ValidatingAdmissionPolicyBinding/cdiplug-dra-node-devices"], &binding)
	if binding.Spec.PolicyName != policy.Name ||
		len(binding.Spec.ValidationActions) != 1 || binding.Spec.ValidationActions[0] != admissionregv1.Deny {
		t.Errorf("the binding does not apply the policy with Deny: %+v", binding.Spec)
	}
	v := compilePolicy(t, &policy)

	const me = "system:serviceaccount:devices:cdiplug"
	onNode := map[string][]string{nodeNameExtra: {"node-a"}}
	cases := []struct {
		name     string
		user     string
		extra    map[string][]string
		op       admission.Operation
		obj, old *unstructured.Unstructured
		admit    bool
	}{
		{"create its node's slice", me, onNode, admission.Create, slice("node-a", "cdiplug.example.com"), nil, true},
		{"update its node's slice", me, onNode, admission.Update, slice("node-a", "cdiplug.example.com"),
			slice("node-a", "cdiplug.example.com"), true},
		{"delete its node's slice", me, onNode, admission.Delete, nil, slice("node-a", "cdiplug.example.com"), true},
		{"create another node's slice", me, onNode, admission.Create, slice("node-b", "cdiplug.example.com"), nil, false},
		{"create another driver's slice", me, onNode, admission.Create, slice("node-a", "gpu.example.com"), nil, false},
		{"create a slice for all nodes", me, onNode, admission.Create, slice("", "cdiplug.example.com"), nil, false},
		// No case moves a slice between nodes or drivers: the API
		// server's validation, before admission, keeps both fields.
		{"delete another node's slice", me, onNode, admission.Delete, nil, slice("node-b", "cdiplug.example.com"), false},
		{"a token that names no node", me, nil, admission.Create, slice("node-a", "cdiplug.example.com"), nil, false},
		{"another install's account: not this policy's", "system:serviceaccount:other:cdiplug", onNode,
			admission.Create, slice("node-b", "cdiplug.example.com"), nil, true},
		{"the scheduler: not this policy's", "system:kube-scheduler", nil, admission.Delete, nil,
			slice("node-b", "cdiplug.example.com"), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var obj, old runtime.Object
			name := ""
			if tc.obj != nil {
				obj, name = tc.obj, tc.obj.GetName()
			}
			if tc.old != nil {
				old, name = tc.old, tc.old.GetName()
			}
			u := &user.DefaultInfo{Name: tc.user, Extra: tc.extra}
			attr := admission.NewAttributesRecord(obj, old, sliceGVK, "", name, sliceGVR, "", tc.op, nil, false, u)
			admitted, why := v.admits(t, &admission.VersionedAttributes{Attributes: attr, VersionedKind: sliceGVK,
				VersionedObject: admission.NewLazyObject(obj), VersionedOldObject: admission.NewLazyObject(old)})
			if !admitted {
				t.Logf("denied by %s", why)
			}
			if admitted != tc.admit {
				t.Errorf("admitted %v, want %v", admitted, tc.admit)
			}
		})
	}
}

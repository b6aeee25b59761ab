// The chart's ValidatingAdmissionPolicy, compiled and evaluated by the API
// server's own admission library (k8s.io/apiserver, at the release Helm
// pins), the way its validating-policy plugin assembles a policy, for the
// requests a node's cdiplug pod, or anyone else, could make.
package helm

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
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

// compilePolicy builds the policy's validator from the library's parts:
// its variables, match conditions, validations and message expressions,
// each compiled in the API server's base CEL environment. A compile error
// fails the test.
func compilePolicy(t *testing.T, p *admissionregv1.ValidatingAdmissionPolicy) validating.Validator {
	t.Helper()
	comp, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		t.Fatal(err)
	}
	withAuthz := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	for _, v := range p.Spec.Variables {
		res := comp.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression},
			withAuthz, environment.StoredExpressions)
		if res.Error != nil {
			t.Fatalf("variable %s does not compile: %v", v.Name, res.Error)
		}
	}
	var match, checks, messages []plugincel.ExpressionAccessor
	for i := range p.Spec.MatchConditions {
		mc := matchconditions.MatchCondition(p.Spec.MatchConditions[i])
		match = append(match, &mc)
	}
	for _, v := range p.Spec.Validations {
		checks = append(checks, &validating.ValidationCondition{Expression: v.Expression, Message: v.Message})
		var m plugincel.ExpressionAccessor
		if v.MessageExpression != "" {
			m = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
		messages = append(messages, m)
	}
	// Every expression alone as well, so a compile error is reported
	// as one rather than as a denial.
	for _, e := range append(append([]plugincel.ExpressionAccessor{}, match...), checks...) {
		res := comp.CompileCELExpression(e, withAuthz, environment.StoredExpressions)
		if res.Error != nil {
			t.Fatalf("%q does not compile: %v", e.GetExpression(), res.Error)
		}
	}
	matcher := matchconditions.NewMatcher(comp.CompileCondition(match, withAuthz, environment.StoredExpressions),
		p.Spec.FailurePolicy, "policy", "validate", p.Name)
	return validating.NewValidator(
		comp.CompileCondition(checks, withAuthz, environment.StoredExpressions), matcher,
		comp.CompileCondition(nil, withAuthz, environment.StoredExpressions),
		comp.CompileCondition(messages, plugincel.OptionalVariableDeclarations{}, environment.StoredExpressions),
		p.Spec.FailurePolicy, nil)
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
	strictDecode(t, objs["ValidatingAdmissionPolicy/cdiplug-dra-devices"], &policy)
	strictDecode(t, objs["ValidatingAdmissionPolicyBinding/cdiplug-dra-devices"], &binding)
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
		{"move another node's slice to its own", me, onNode, admission.Update,
			slice("node-a", "cdiplug.example.com"), slice("node-b", "cdiplug.example.com"), false},
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
			res := v.Validate(context.Background(), sliceGVR,
				&admission.VersionedAttributes{Attributes: attr, VersionedKind: sliceGVK,
					VersionedObject: admission.NewLazyObject(obj), VersionedOldObject: admission.NewLazyObject(old)},
				nil, nil, 1_000_000, nil)
			admitted := true
			for _, d := range res.Decisions {
				if d.Evaluation == validating.EvalError {
					t.Errorf("evaluation error: %s", d.Message)
				}
				if d.Action != validating.ActionAdmit {
					admitted = false
					t.Logf("denied: %s", d.Message)
				}
			}
			if admitted != tc.admit {
				t.Errorf("admitted %v, want %v (%+v)", admitted, tc.admit, res.Decisions)
			}
		})
	}
}

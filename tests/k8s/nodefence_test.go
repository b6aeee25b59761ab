package k8stest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
)

// The ValidatingAdmissionPolicy that `cdiplug manifests` prints, compiled
// and evaluated by the API server's own CEL admission code (the policy's
// variables, match conditions, validations and message expressions, as
// the validating admission plugin compiles them), against ResourceSlice
// writes by the driver's service account from its own node and others.
// Which writes reach the policy at all (its resourceRules) is the offline
// checker's part (deploy/check_dra_manifests.py).

const (
	fenceDriver = "cdiplug.example.com"
	fenceNS     = "devices"
	fenceSA     = "system:serviceaccount:devices:cdiplug"
	fenceConfig = `{ "dra": { "driver": "` + fenceDriver + `" }, "resources": [
 { "name": "example.com/serial", "api": "dra", "match": [ { "path": "/dev/ttyS*" } ] } ] }`
)

// fencePolicy runs cdiplug manifests and decodes the policy it prints.
func fencePolicy(t *testing.T) *admissionv1.ValidatingAdmissionPolicy {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfg, []byte(fenceConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(cdiplugBin, "manifests", "--config", cfg, "--namespace", fenceNS).Output()
	if err != nil {
		t.Fatalf("cdiplug manifests: %v", err)
	}
	for _, doc := range strings.Split(string(out), "\n---\n") {
		doc = strings.TrimPrefix(doc, "---\n")
		var p admissionv1.ValidatingAdmissionPolicy
		if err := json.Unmarshal([]byte(doc), &p); err != nil {
			t.Fatalf("a document is not JSON: %v", err)
		}
		if p.Kind == "ValidatingAdmissionPolicy" {
			return &p
		}
	}
	t.Fatal("no ValidatingAdmissionPolicy in the output")
	return nil
}

// compileFence wires the policy's expressions into a validator the way
// the API server's validating admission plugin does for a policy without
// parameters.
func compileFence(t *testing.T, p *admissionv1.ValidatingAdmissionPolicy) validating.Validator {
	t.Helper()
	comp, err := plugincel.NewCompositedCompiler(fenceEnvSet())
	if err != nil {
		t.Fatal(err)
	}
	vars := make([]plugincel.NamedExpressionAccessor, 0, len(p.Spec.Variables))
	for _, v := range p.Spec.Variables {
		vars = append(vars, &validating.Variable{Name: v.Name, Expression: v.Expression})
	}
	comp.CompileAndStoreVariables(vars, fenceDecls(true), environment.StoredExpressions)
	conds := make([]plugincel.ExpressionAccessor, 0, len(p.Spec.MatchConditions))
	for i := range p.Spec.MatchConditions {
		conds = append(conds, (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i]))
	}
	matcher := matchconditions.NewMatcher(comp.CompileCondition(conds, fenceDecls(true),
		environment.StoredExpressions), p.Spec.FailurePolicy, "policy", "validate", p.Name)
	checks := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	for i, v := range p.Spec.Validations {
		checks[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message,
			Reason: v.Reason}
		if v.MessageExpression != "" {
			messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	return fenceValidator(
		comp.CompileCondition(checks, fenceDecls(true), environment.StoredExpressions), matcher,
		comp.CompileCondition(nil, fenceDecls(true), environment.StoredExpressions),
		comp.CompileCondition(messages, fenceDecls(false), environment.StoredExpressions),
		p.Spec.FailurePolicy)
}

func slice(node, driver string) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"},
		ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver,
			Pool: resourcev1.ResourcePool{Name: node + "/example.com/serial", ResourceSliceCount: 1}},
	}
	if node != "" {
		s.Spec.NodeName = &node
	} else {
		all := true
		s.Spec.AllNodes = &all
	}
	return s
}

func TestNodeFencePolicy(t *testing.T) {
	p := fencePolicy(t)
	// An expression that does not compile is an evaluation error, which
	// the policy's failurePolicy Fail turns into a denial: the allowed
	// cases below catch it.
	v := compileFence(t, p)
	own := map[string][]string{"authentication.kubernetes.io/node-name": {"node-1"}}
	cases := []struct {
		name     string
		user     string
		extra    map[string][]string
		op       admission.Operation
		obj, old *resourcev1.ResourceSlice
		denied   string // a part of the message; "" when allowed
	}{
		{"create on its own node", fenceSA, own, admission.Create, slice("node-1", fenceDriver), nil, ""},
		{"update on its own node", fenceSA, own, admission.Update, slice("node-1", fenceDriver),
			slice("node-1", fenceDriver), ""},
		{"delete on its own node", fenceSA, own, admission.Delete, nil, slice("node-1", fenceDriver), ""},
		{"create for another node", fenceSA, own, admission.Create, slice("node-2", fenceDriver), nil,
			"cdiplug on node node-1 may write only ResourceSlices whose spec.nodeName is that node"},
		{"update moving a slice to another node", fenceSA, own, admission.Update,
			slice("node-2", fenceDriver), slice("node-1", fenceDriver), "node node-1"},
		{"delete of another node's slice", fenceSA, own, admission.Delete, nil,
			slice("node-2", fenceDriver), "node node-1"},
		{"a slice for all nodes", fenceSA, own, admission.Create, slice("", fenceDriver), nil,
			"node node-1"},
		{"another driver's slice", fenceSA, own, admission.Create, slice("node-1", "gpu.example.com"),
			nil, "only ResourceSlices of driver " + fenceDriver},
		{"delete of another driver's slice", fenceSA, own, admission.Delete, nil,
			slice("node-1", "gpu.example.com"), "of driver " + fenceDriver},
		{"a token without a node", fenceSA, nil, admission.Create, slice("node-1", fenceDriver), nil,
			"names no node"},
		{"another service account is not fenced", "system:serviceaccount:other:driver", own,
			admission.Create, slice("node-2", "gpu.example.com"), nil, ""},
	}
	gvr := resourcev1.SchemeGroupVersion.WithResource("resourceslices")
	gvk := resourcev1.SchemeGroupVersion.WithKind("ResourceSlice")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var obj, old runtime.Object
			if c.obj != nil {
				obj = c.obj
			}
			if c.old != nil {
				old = c.old
			}
			u := &user.DefaultInfo{Name: c.user, Extra: c.extra}
			attr := admission.NewAttributesRecord(obj, old, gvk, "", "s", gvr, "", c.op, nil, false, u)
			res := fenceValidate(context.Background(), v, gvr, fenceAttributes(attr, gvk, obj, old))
			var msgs []string
			for _, d := range res.Decisions {
				if d.Action == validating.ActionDeny {
					msgs = append(msgs, d.Message)
				}
			}
			switch {
			case c.denied == "" && len(msgs) > 0:
				t.Errorf("denied: %q", msgs)
			case c.denied != "" && len(msgs) == 0:
				t.Errorf("allowed; want denied with %q", c.denied)
			case c.denied != "" && !strings.Contains(strings.Join(msgs, "\n"), c.denied):
				t.Errorf("denied with %q; want %q", msgs, c.denied)
			}
		})
	}
}

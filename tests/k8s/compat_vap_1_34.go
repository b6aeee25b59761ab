//go:build k8s_1_34

package k8stest

import (
	"context"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// 1.34 enforces strict cost for policies by default
// (StrictCostEnforcementForVAP, GA).
func fenceEnvSet() *environment.EnvSet {
	return environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion(), true)
}

func fenceDecls(authorizer bool) plugincel.OptionalVariableDeclarations {
	return plugincel.OptionalVariableDeclarations{HasAuthorizer: authorizer, StrictCost: true}
}

// No authorizer: the policy never calls one.
func fenceValidate(ctx context.Context, v validating.Validator, gvr schema.GroupVersionResource,
	va *admission.VersionedAttributes) validating.ValidateResult {
	return v.Validate(ctx, gvr, va, nil, nil, celconfig.RuntimeCELCostBudget, nil)
}

// The objects as the API server hands them to a policy.
func fenceAttributes(attr admission.Attributes, gvk schema.GroupVersionKind,
	obj, old runtime.Object) *admission.VersionedAttributes {
	return &admission.VersionedAttributes{Attributes: attr, VersionedKind: gvk,
		VersionedObject: obj, VersionedOldObject: old}
}

func fenceValidator(checks plugincel.ConditionEvaluator, m matchconditions.Matcher,
	audit, messages plugincel.ConditionEvaluator,
	fp *admissionv1.FailurePolicyType) validating.Validator {
	return validating.NewValidator(checks, m, audit, messages, fp)
}

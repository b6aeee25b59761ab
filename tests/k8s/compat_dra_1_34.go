//go:build k8s_1_34

package k8stest

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
	"k8s.io/kubernetes/pkg/kubelet/config"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager/cache"
)

var draFeaturesOnce sync.Once

// draFeatures turns on what a 1.34 cluster needs for device health in pod
// status: ResourceHealthStatus is alpha (off by default) in 1.34.
func draFeatures() {
	draFeaturesOnce.Do(func() {
		if err := utilfeature.DefaultMutableFeatureGate.Set("ResourceHealthStatus=true"); err != nil {
			panic(err)
		}
	})
}

// 1.34's node getter takes no context.
func draStart(ctx context.Context, m *dra.Manager, active dra.ActivePodsFunc,
	getNode func(context.Context) (*corev1.Node, error), ready config.SourcesReady) error {
	return m.Start(ctx, active, func() (*corev1.Node, error) { return getNode(ctx) }, ready)
}

// 1.34's manager has no Stop: cancelling Start's context ends it.
func draStop(*dra.Manager) {}

func draRunPluginManager(ctx context.Context, pm pluginmanager.PluginManager, ready config.SourcesReady) {
	pm.Run(ready, ctx.Done())
}

func draUpdateStatus(_ context.Context, m *dra.Manager, pod *corev1.Pod, status *corev1.PodStatus) {
	m.UpdateAllocatedResourcesStatus(pod, status)
}

// 1.34's ResourceHealth has no message.
func draHealthMessage(corev1.ResourceHealth) (string, bool) { return "", false }

// observedHandler calls before() ahead of the DRA handler's RegisterPlugin:
// the plugin manager sends NotifyRegistrationStatus only after that.
type observedHandler struct {
	cache.PluginHandler
	before func()
}

func (h observedHandler) RegisterPlugin(name, endpoint string, versions []string, timeout *time.Duration) error {
	h.before()
	return h.PluginHandler.RegisterPlugin(name, endpoint, versions, timeout)
}

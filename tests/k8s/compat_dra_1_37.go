//go:build k8s_1_37

package k8stest

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
	"k8s.io/kubernetes/pkg/kubelet/config"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager/cache"
)

// draFeatures: ResourceHealthStatus is on by default since 1.36, and
// ResourceHealthStatusMessage is on by default in 1.37.
func draFeatures() {}

func draStart(ctx context.Context, m *dra.Manager, active dra.ActivePodsFunc,
	getNode func(context.Context) (*corev1.Node, error), ready config.SourcesReady) error {
	return m.Start(ctx, active, getNode, ready)
}

func draStop(m *dra.Manager) { m.Stop() }

func draRunPluginManager(ctx context.Context, pm pluginmanager.PluginManager, ready config.SourcesReady) {
	pm.Run(ctx, ready, ctx.Done())
}

func draUpdateStatus(ctx context.Context, m *dra.Manager, pod *corev1.Pod, status *corev1.PodStatus) {
	m.UpdateAllocatedResourcesStatus(klog.FromContext(ctx), pod, status)
}

// draHealthMessage is the message the kubelet reports with a device's
// health (ResourceHealthStatusMessage).
func draHealthMessage(rh corev1.ResourceHealth) (string, bool) {
	if rh.Message == nil {
		return "", true
	}
	return *rh.Message, true
}

// observedHandler calls before() ahead of the DRA handler's RegisterPlugin:
// the plugin manager sends NotifyRegistrationStatus only after that.
type observedHandler struct {
	cache.PluginHandler
	before func()
}

func (h observedHandler) RegisterPlugin(ctx context.Context, name, endpoint string, versions []string, timeout *time.Duration) error {
	h.before()
	return h.PluginHandler.RegisterPlugin(ctx, name, endpoint, versions, timeout)
}

package k8stest

// A test API server for cdiplug's DRA client: HTTPS with a bearer token,
// serving exactly the calls cdiplug makes (daemon/kube/*.c) from the object
// tracker of client-go's fake clientset, which the kubelet's DRA manager
// reads and writes through the same tracker.
//
// Why not a real kube-apiserver: compiling it (and its embedded etcd) for
// both releases costs more minutes on CI's two cores than the whole rest of
// the suite, so the server here is the smallest honest stand-in, and what
// matters of the real one is used as it is: every ResourceSlice write goes
// through the API server's own create and update path for that kind
// (rest.BeforeCreate / rest.BeforeUpdate with the registry's ResourceSlice
// strategy, after defaulting and conversion to the internal types with the
// real scheme), and is refused with 422 and the API's Status as the real
// server refuses it. resourceVersion, optimistic concurrency on update and
// the watch's event stream follow the API's rules for what cdiplug uses.

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	resourceapi "k8s.io/kubernetes/pkg/apis/resource"
	_ "k8s.io/kubernetes/pkg/apis/resource/install"
	"k8s.io/kubernetes/pkg/registry/resource/resourceslice"
)

var (
	slicesGVR = resourcev1.SchemeGroupVersion.WithResource("resourceslices")
	claimsGVR = resourcev1.SchemeGroupVersion.WithResource("resourceclaims")
	nodesGVR  = corev1.SchemeGroupVersion.WithResource("nodes")
)

// sliceEvent is one change of a ResourceSlice, kept for watches that start
// from an older resourceVersion.
type sliceEvent struct {
	rv    int64
	typ   watch.EventType
	slice *resourcev1.ResourceSlice
}

// apiStore wraps the fake clientset's tracker with what the tracker leaves
// out: one resourceVersion counter stamped on every object written (as
// etcd's revision is), the conflict check of an update, and the log of
// ResourceSlice events the watch serves.
type apiStore struct {
	clienttesting.ObjectTracker
	mu      sync.Mutex
	rv      int64
	events  []sliceEvent
	changed chan struct{} // closed and replaced on every slice event
}

func (s *apiStore) stamp(obj runtime.Object) (metav1.Object, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	s.rv++
	m.SetResourceVersion(strconv.FormatInt(s.rv, 10))
	return m, nil
}

// record logs a slice event; s.mu is held.
func (s *apiStore) record(gvr schema.GroupVersionResource, typ watch.EventType, obj runtime.Object) {
	if gvr != slicesGVR {
		return
	}
	s.events = append(s.events, sliceEvent{s.rv, typ, obj.DeepCopyObject().(*resourcev1.ResourceSlice)})
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *apiStore) Add(obj runtime.Object) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	obj = obj.DeepCopyObject()
	if _, err := s.stamp(obj); err != nil {
		return err
	}
	return s.ObjectTracker.Add(obj)
}

func (s *apiStore) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	obj = obj.DeepCopyObject()
	if m, err := meta.Accessor(obj); err != nil {
		return err
	} else if m.GetResourceVersion() != "" {
		return apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	if _, err := s.stamp(obj); err != nil {
		return err
	}
	if err := s.ObjectTracker.Create(gvr, obj, ns, opts...); err != nil {
		return err
	}
	s.record(gvr, watch.Added, obj)
	return nil
}

func (s *apiStore) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	obj = obj.DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	old, err := s.ObjectTracker.Get(gvr, ns, m.GetName())
	if err != nil {
		return err
	}
	oldMeta, _ := meta.Accessor(old)
	if rv := m.GetResourceVersion(); rv != "" && rv != oldMeta.GetResourceVersion() {
		return apierrors.NewConflict(gvr.GroupResource(), m.GetName(),
			fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if _, err := s.stamp(obj); err != nil {
		return err
	}
	if err := s.ObjectTracker.Update(gvr, obj, ns, opts...); err != nil {
		return err
	}
	s.record(gvr, watch.Modified, obj)
	return nil
}

func (s *apiStore) Delete(gvr schema.GroupVersionResource, ns, name string, opts ...metav1.DeleteOptions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, err := s.ObjectTracker.Get(gvr, ns, name)
	if err != nil {
		return err
	}
	if err := s.ObjectTracker.Delete(gvr, ns, name, opts...); err != nil {
		return err
	}
	// The object a DELETED event carries has the deletion's revision.
	if _, err := s.stamp(old); err != nil {
		return err
	}
	s.record(gvr, watch.Deleted, old)
	return nil
}

// deleteSlices is DeleteCollection of ResourceSlices by field selector,
// which the kubelet's DRA plugin manager uses to wipe a node's slices and
// the fake clientset does not implement.
func (s *apiStore) deleteSlices(sel fields.Selector) error {
	for _, sl := range s.Slices(sel) {
		if err := s.Delete(slicesGVR, "", sl.Name); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// Slices are the stored ResourceSlices that sel matches, and the
// resourceVersion they were read at.
func (s *apiStore) slicesAt(sel fields.Selector) ([]resourcev1.ResourceSlice, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	obj, err := s.ObjectTracker.List(slicesGVR, resourcev1.SchemeGroupVersion.WithKind("ResourceSlice"), "")
	if err != nil {
		panic(err) // the scheme knows the kind: never
	}
	out := []resourcev1.ResourceSlice{} // "items": [] as the real server sends, never null
	for _, sl := range obj.(*resourcev1.ResourceSliceList).Items {
		if sel == nil || sel.Matches(sliceFields(&sl)) {
			out = append(out, sl)
		}
	}
	return out, s.rv
}

func (s *apiStore) Slices(sel fields.Selector) []resourcev1.ResourceSlice {
	out, _ := s.slicesAt(sel)
	return out
}

// SliceEvents counts the events of one type so far.
func (s *apiStore) SliceEvents(typ watch.EventType) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.events {
		if e.typ == typ {
			n++
		}
	}
	return n
}

// sliceFields are the fields a ResourceSlice can be selected by.
func sliceFields(sl *resourcev1.ResourceSlice) fields.Set {
	f := fields.Set{"metadata.name": sl.Name, "spec.driver": sl.Spec.Driver, "spec.pool.name": sl.Spec.Pool.Name}
	if sl.Spec.NodeName != nil {
		f["spec.nodeName"] = *sl.Spec.NodeName
	}
	return f
}

// testAPIServer is the HTTPS server with its store, the kubelet's client
// over the same store, and a kubeconfig for cdiplug.
type testAPIServer struct {
	t          *testing.T
	Store      *apiStore
	Client     *fake.Clientset // the kubelet's view of the same objects
	Kubeconfig string
	token      string
	srv        *httptest.Server
	mu         sync.Mutex
	refused    []string // ResourceSlice writes validation refused
}

// newTestAPIServer starts the server with one Node object.
func newTestAPIServer(t *testing.T, node string) *testAPIServer {
	t.Helper()
	cs := fake.NewClientset()
	st := &apiStore{ObjectTracker: cs.Tracker(), changed: make(chan struct{})}
	cs.PrependReactor("delete-collection", "resourceslices", func(a clienttesting.Action) (bool, runtime.Object, error) {
		sel := a.(clienttesting.DeleteCollectionAction).GetListRestrictions().Fields
		return true, nil, st.deleteSlices(sel)
	})
	cs.PrependReactor("*", "*", clienttesting.ObjectReaction(st))
	a := &testAPIServer{t: t, Store: st, Client: cs, token: "cdiplug-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	if err := st.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: types.UID("9c0e5a4e-0000-4000-8000-" + fmt.Sprintf("%012d", len(node)))}}); err != nil {
		t.Fatal(err)
	}
	a.srv = httptest.NewUnstartedServer(http.HandlerFunc(a.serve))
	a.srv.EnableHTTP2 = true // as the real server offers
	a.srv.StartTLS()
	t.Cleanup(a.srv.Close)

	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	pemCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.srv.Certificate().Raw})
	if err := os.WriteFile(ca, pemCA, 0o644); err != nil {
		t.Fatal(err)
	}
	a.Kubeconfig = filepath.Join(dir, "kubeconfig")
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\ncurrent-context: t\n"+
		"contexts:\n- name: t\n  context: {cluster: c, user: u}\n"+
		"clusters:\n- name: c\n  cluster:\n    server: %s\n    certificate-authority: %s\n"+
		"users:\n- name: u\n  user:\n    token: %s\n", a.srv.URL, ca, a.token)
	if err := os.WriteFile(a.Kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if r := a.Refused(); len(r) > 0 {
			t.Errorf("the API server's validation refused ResourceSlices cdiplug wrote:\n%s", strings.Join(r, "\n"))
		}
	})
	return a
}

// Refused are the ResourceSlice writes validation refused so far.
func (a *testAPIServer) Refused() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.refused...)
}

// The routes cdiplug uses, and nothing else.
func (a *testAPIServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+a.token {
		writeStatus(w, apierrors.NewUnauthorized("Unauthorized"))
		return
	}
	p := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	q := r.URL.Query()
	const slices = "apis/resource.k8s.io/v1/resourceslices"
	switch {
	case r.Method == http.MethodGet && len(p) == 4 && p[0] == "api" && p[1] == "v1" && p[2] == "nodes":
		a.get(w, nodesGVR, "", p[3], "Node")
	case r.Method == http.MethodGet && len(p) == 7 && strings.HasPrefix(r.URL.Path, "/apis/resource.k8s.io/v1/namespaces/") && p[6] != "" && p[5] == "resourceclaims":
		a.get(w, claimsGVR, p[4], p[6], "ResourceClaim")
	case r.Method == http.MethodGet && strings.Join(p, "/") == slices && q.Get("watch") == "true":
		a.watchSlices(w, r)
	case r.Method == http.MethodGet && strings.Join(p, "/") == slices:
		a.listSlices(w, r)
	case r.Method == http.MethodPost && strings.Join(p, "/") == slices:
		a.writeSlice(w, r, "")
	case (r.Method == http.MethodPut || r.Method == http.MethodDelete) && len(p) == 5 && strings.Join(p[:4], "/") == slices:
		if r.Method == http.MethodDelete {
			if err := a.Store.Delete(slicesGVR, "", p[4]); err != nil {
				writeStatus(w, err)
				return
			}
			writeJSON(w, http.StatusOK, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess})
			return
		}
		a.writeSlice(w, r, p[4])
	default:
		a.t.Errorf("test API server: cdiplug called %s %s, which it does not serve", r.Method, r.URL)
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{}, r.URL.Path))
	}
}

func (a *testAPIServer) get(w http.ResponseWriter, gvr schema.GroupVersionResource, ns, name, kind string) {
	obj, err := a.Store.Get(gvr, ns, name)
	if err != nil {
		writeStatus(w, err)
		return
	}
	obj.GetObjectKind().SetGroupVersionKind(gvr.GroupVersion().WithKind(kind))
	writeJSON(w, http.StatusOK, obj)
}

func selectorOf(w http.ResponseWriter, r *http.Request) (fields.Selector, bool) {
	sel, err := fields.ParseSelector(r.URL.Query().Get("fieldSelector"))
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return nil, false
	}
	return sel, true
}

func (a *testAPIServer) listSlices(w http.ResponseWriter, r *http.Request) {
	sel, ok := selectorOf(w, r)
	if !ok {
		return
	}
	items, rv := a.Store.slicesAt(sel)
	list := &resourcev1.ResourceSliceList{
		TypeMeta: metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSliceList"},
		ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatInt(rv, 10)},
		Items:    items,
	}
	writeJSON(w, http.StatusOK, list)
}

// watchSlices streams the slice events after the given resourceVersion, one
// JSON object a line, until timeoutSeconds or the client goes.
func (a *testAPIServer) watchSlices(w http.ResponseWriter, r *http.Request) {
	sel, ok := selectorOf(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	from, err := strconv.ParseInt(q.Get("resourceVersion"), 10, 64)
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest("a watch here needs the resourceVersion of a list"))
		return
	}
	timeout := 30 * time.Minute
	if s, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && s > 0 {
		timeout = time.Duration(s) * time.Second
	}
	end := time.NewTimer(timeout)
	defer end.Stop()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	flusher.Flush()
	enc := json.NewEncoder(w)
	for {
		a.Store.mu.Lock()
		var pending []sliceEvent
		for _, e := range a.Store.events {
			if e.rv > from && sel.Matches(sliceFields(e.slice)) {
				pending = append(pending, e)
			}
		}
		changed := a.Store.changed
		a.Store.mu.Unlock()
		for _, e := range pending {
			e.slice.TypeMeta = metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"}
			if enc.Encode(map[string]any{"type": e.typ, "object": e.slice}) != nil {
				return
			}
			from = e.rv
		}
		flusher.Flush()
		select {
		case <-changed:
		case <-end.C:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// writeSlice is POST (name "") or PUT of a ResourceSlice through the API
// server's own create or update path.
func (a *testAPIServer) writeSlice(w http.ResponseWriter, r *http.Request, name string) {
	var in resourcev1.ResourceSlice
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 3<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		a.t.Errorf("test API server: a ResourceSlice cdiplug sent does not decode strictly: %v", err)
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	if in.APIVersion != "resource.k8s.io/v1" || in.Kind != "ResourceSlice" {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("%s/%s is not resource.k8s.io/v1 ResourceSlice", in.APIVersion, in.Kind)))
		return
	}
	if name != "" && in.Name != name {
		writeStatus(w, apierrors.NewBadRequest("the name of the object does not match the name on the URL"))
		return
	}
	var old *resourcev1.ResourceSlice
	if name != "" {
		o, err := a.Store.Get(slicesGVR, "", name)
		if err != nil {
			writeStatus(w, err)
			return
		}
		old = o.(*resourcev1.ResourceSlice)
	}
	out, err := admitSlice(&in, old)
	if err != nil {
		a.mu.Lock()
		a.refused = append(a.refused, err.Error())
		a.mu.Unlock()
		writeStatus(w, err)
		return
	}
	code := http.StatusCreated
	if old == nil {
		err = a.Store.Create(slicesGVR, out, "")
	} else {
		code = http.StatusOK
		err = a.Store.Update(slicesGVR, out, "")
	}
	if err != nil {
		writeStatus(w, err)
		return
	}
	stored, err := a.Store.Get(slicesGVR, "", out.Name)
	if err != nil {
		writeStatus(w, err)
		return
	}
	stored.GetObjectKind().SetGroupVersionKind(resourcev1.SchemeGroupVersion.WithKind("ResourceSlice"))
	writeJSON(w, code, stored)
}

// admitSlice runs what the real server runs on a ResourceSlice write before
// storing it: defaulting, conversion to the internal version, the
// strategy's preparation and validation (ObjectMeta's and, where the
// release has it, declarative validation included), and conversion back.
func admitSlice(in, old *resourcev1.ResourceSlice) (*resourcev1.ResourceSlice, error) {
	sc := legacyscheme.Scheme
	verb := "create"
	if old != nil {
		verb = "update"
	}
	ctx := genericapirequest.WithNamespace(context.Background(), "")
	ctx = genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
		IsResourceRequest: true, Verb: verb, APIGroup: "resource.k8s.io", APIVersion: "v1",
		Resource: "resourceslices", Name: in.Name,
	})
	toInternal := func(v *resourcev1.ResourceSlice) (*resourceapi.ResourceSlice, error) {
		v = v.DeepCopy()
		sc.Default(v)
		obj := &resourceapi.ResourceSlice{}
		return obj, sc.Convert(v, obj, nil)
	}
	obj, err := toInternal(in)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if old == nil {
		rest.FillObjectMetaSystemFields(obj)
		err = rest.BeforeCreate(resourceslice.Strategy, ctx, obj)
	} else {
		var o *resourceapi.ResourceSlice
		if o, err = toInternal(old); err == nil {
			err = rest.BeforeUpdate(resourceslice.Strategy, ctx, obj, o)
		}
	}
	if err != nil {
		return nil, err
	}
	out := &resourcev1.ResourceSlice{}
	if err := sc.Convert(obj, out, nil); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return out, nil
}

func writeStatus(w http.ResponseWriter, err error) {
	var st metav1.Status
	if s, ok := err.(apierrors.APIStatus); ok {
		st = s.Status()
	} else {
		st = apierrors.NewInternalError(err).Status()
	}
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	writeJSON(w, int(st.Code), &st)
}

func writeJSON(w http.ResponseWriter, code int, obj any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(obj)
}

// TestAPIServerRefusesAnInvalidSlice checks the server itself: a slice the
// real API server refuses is refused here too, with 422 and the API's
// Status, so that cdiplug's slices passing it means something.
func TestAPIServerRefusesAnInvalidSlice(t *testing.T) {
	node := "node1"
	good := &resourcev1.ResourceSlice{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"},
		ObjectMeta: metav1.ObjectMeta{Name: "node1-example.com-abc"},
		Spec: resourcev1.ResourceSliceSpec{Driver: "example.com", NodeName: &node,
			Pool:    resourcev1.ResourcePool{Name: "node1", ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "dev0"}}},
	}
	bad := good.DeepCopy()
	bad.Spec.Devices = append(bad.Spec.Devices, resourcev1.Device{Name: "Not_A_DNS_Label"})
	cases := []struct {
		name  string
		slice *resourcev1.ResourceSlice
		want  int
	}{
		{"valid", good, http.StatusCreated},
		{"invalid device name", bad, http.StatusUnprocessableEntity},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := &testAPIServer{t: t, Store: &apiStore{ObjectTracker: fake.NewClientset().Tracker(), changed: make(chan struct{})}, token: "x"}
			body, _ := json.Marshal(c.slice)
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/apis/resource.k8s.io/v1/resourceslices", strings.NewReader(string(body)))
			req.Header.Set("Authorization", "Bearer x")
			a.serve(rec, req)
			if rec.Code != c.want {
				t.Fatalf("POST answered %d, want %d: %s", rec.Code, c.want, rec.Body)
			}
			if c.want == http.StatusUnprocessableEntity && !strings.Contains(rec.Body.String(), `"reason":"Invalid"`) {
				t.Errorf("the refusal is not the API's Invalid status: %s", rec.Body)
			}
		})
	}
}

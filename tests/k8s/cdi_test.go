package k8stest

// cdiplug's CDI specs read by the CDI reference library
// (tags.cncf.io/container-device-interface, as containerd and CRI-O use
// it): every spec loads, every name cdiplug answers Allocate with
// resolves, and the edits the library makes to an OCI spec for a device
// are the nodes, cgroup rules, env and mounts the config asked for.
//
// The library stats each node's host path to fill in its numbers, as the
// runtime does on the node, and cdiplug writes host paths: so the fake
// host's nodes here are made with the numbers of this machine's own
// /dev/null, /dev/zero, ... and the expected numbers are read from those.

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"tags.cncf.io/container-device-interface/pkg/cdi"
)

// cdiNode is a node the config's device should carry into the container.
type cdiNode struct {
	path   string // in the container and on the host
	mode   os.FileMode
	uid    *uint32
	gid    *uint32
	access string // the cgroup rule's
}

func cdiU32(v uint32) *uint32 { return &v }

// cdiHostNode mirrors this machine's node at path into the fake host, so
// the library's stat of the host path (the real one) agrees with what
// cdiplug found under --host-root.
func cdiHostNode(t *testing.T, d *daemon, path string) (major, minor uint32) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR {
		t.Skipf("%s: not a character device here (%v)", path, err)
	}
	major, minor = unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev))
	d.MknodNum(strings.TrimPrefix(path, "/"), major, minor)
	return major, minor
}

// cdiRegistrarServer accepts every registration: cdiplug serves once a kubelet.sock
// is there, and this file asks cdiplug's socket directly. It stands in for
// the kubelet's registration server, which deviceplugin_test.go runs for
// real but only at its fixed path.
type cdiRegistrarServer struct {
	pluginapi.UnimplementedRegistrationServer
}

func (cdiRegistrarServer) Register(context.Context, *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	return &pluginapi.Empty{}, nil
}

// cdiRegistrar serves the cdiRegistrarServer on kubelet.sock in a new dir, the
// --kubelet-dir to give cdiplug.
func cdiRegistrar(t *testing.T) string {
	t.Helper()
	kdir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(kdir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(s, cdiRegistrarServer{})
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return kdir
}

// cdiPlugin dials the one plugin socket cdiplug serves in kdir with the
// kubelet's generated client, once it accepts: the file is there from
// bind(), a moment before listen(), and a dial in between is refused.
func cdiPlugin(t *testing.T, kdir string) pluginapi.DevicePluginClient {
	t.Helper()
	var sock string
	eventually(t, dpWait, "a plugin socket in "+kdir+" that accepts", func() bool {
		socks, _ := filepath.Glob(filepath.Join(kdir, "*.sock"))
		for _, s := range socks {
			if filepath.Base(s) == "kubelet.sock" {
				continue
			}
			if c, err := net.Dial("unix", s); err == nil {
				_ = c.Close()
				sock = s
			}
		}
		return sock != ""
	})
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

// cdiIDs is the first device list cdiplug sends.
func cdiIDs(t *testing.T, c pluginapi.DevicePluginClient) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), dpWait)
	defer cancel()
	s, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range resp.Devices {
		ids = append(ids, d.ID)
	}
	sort.Strings(ids)
	return ids
}

// cdiAnswer allocates ids for one container and returns the CDI names of
// the answer: its CDI device list and its CDI annotations, parsed by the
// library as a runtime parses them.
func cdiAnswer(t *testing.T, c pluginapi.DevicePluginClient, ids ...string) (cri, annotated []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), dpWait)
	defer cancel()
	resp, err := c.Allocate(ctx, &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
	if err != nil {
		t.Fatalf("Allocate %v: %v", ids, err)
	}
	if len(resp.ContainerResponses) != 1 {
		t.Fatalf("Allocate %v: %d container answers", ids, len(resp.ContainerResponses))
	}
	cr := resp.ContainerResponses[0]
	for _, d := range cr.CdiDevices {
		cri = append(cri, d.Name)
	}
	_, annotated, err = cdi.ParseAnnotations(cr.Annotations)
	if err != nil {
		t.Fatalf("the CDI library cannot parse the answer's annotations %v: %v", cr.Annotations, err)
	}
	return cri, annotated
}

// cdiLoadAll loads the CDI dir and checks that every spec file cdiplug
// wrote is one the library loaded without error.
func cdiLoadAll(t *testing.T, d *daemon) *cdi.Cache {
	t.Helper()
	cache := dpCDICache(t, d)
	loaded := map[string]bool{}
	for _, v := range cache.ListVendors() {
		for _, s := range cache.GetVendorSpecs(v) {
			loaded[filepath.Base(s.GetPath())] = true
			if errs := cache.GetSpecErrors(s); len(errs) != 0 {
				t.Errorf("%s: %v", s.GetPath(), errs)
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(d.CDIDir, "*.json"))
	if len(files) == 0 {
		t.Fatalf("cdiplug wrote no spec into %s", d.CDIDir)
	}
	for _, f := range files {
		if !loaded[filepath.Base(f)] {
			t.Errorf("the CDI library did not load %s", f)
		}
	}
	return cache
}

func TestCDISpecs(t *testing.T) {
	cases := []struct {
		name   string
		config string      // one resource
		nodes  []string    // this machine's nodes mirrored into the host
		id     string      // the ID allocated
		cdi    string      // the CDI name cdiplug must answer with
		want   []cdiNode   // in the container
		env    []string    // sorted
		mounts []oci.Mount // in order
		annot  bool        // answered in annotations (cdi-annotations)
	}{{
		name:   "plain node",
		config: `{"name": "example.com/null", "match": [{"path": "/dev/null"}]}`,
		nodes:  []string{"/dev/null"}, id: "null", cdi: "example.com/null=null",
		want: []cdiNode{{path: "/dev/null", mode: 0o666, access: "rwm"}},
	}, {
		name: "permissions and mode",
		config: `{"name": "example.com/zero", "match": [{"path": "/dev/zero",
			"permissions": "rw", "mode": "0640"}]}`,
		nodes: []string{"/dev/zero"}, id: "zero", cdi: "example.com/zero=zero",
		want: []cdiNode{{path: "/dev/zero", mode: 0o640, access: "rw"}},
	}, {
		name: "owner and group",
		config: `{"name": "example.com/full", "match": [{"path": "/dev/full",
			"owner": 1000, "group": 1001, "permissions": "r"}]}`,
		nodes: []string{"/dev/full"}, id: "full", cdi: "example.com/full=full",
		want: []cdiNode{{path: "/dev/full", mode: 0o666, uid: cdiU32(1000), gid: cdiU32(1001), access: "r"}},
	}, {
		name: "env and mounts",
		config: `{"name": "example.com/rng", "match": [{"path": "/dev/random",
			"env": {"RNG_KIND": "hw", "RNG_PATH": "/dev/random"},
			"mounts": [{"hostPath": "/etc/rng", "containerPath": "/etc/rng", "readOnly": true},
			           {"hostPath": "/var/lib/rng", "containerPath": "/var/lib/rng"}]}]}`,
		nodes: []string{"/dev/random"}, id: "random", cdi: "example.com/rng=random",
		want: []cdiNode{{path: "/dev/random", mode: 0o666, access: "rwm"}},
		env:  []string{"RNG_KIND=hw", "RNG_PATH=/dev/random"},
		mounts: []oci.Mount{
			{Destination: "/etc/rng", Source: "/etc/rng", Options: []string{"rbind", "nosuid", "nodev", "ro"}},
			{Destination: "/var/lib/rng", Source: "/var/lib/rng", Options: []string{"rbind", "nosuid", "nodev", "rw"}},
		},
	}, {
		name:   "a share",
		config: `{"name": "example.com/urandom", "shares": 3, "match": [{"path": "/dev/urandom"}]}`,
		nodes:  []string{"/dev/urandom"}, id: "urandom-2", cdi: "example.com/urandom=urandom",
		want: []cdiNode{{path: "/dev/urandom", mode: 0o666, access: "rwm"}},
	}, {
		// /dev/zero has no sysfs parent here: it joins every /dev/null.
		name:   "several paths, one device",
		config: `{"name": "example.com/pair", "match": [{"paths": ["/dev/null", "/dev/zero"]}]}`,
		nodes:  []string{"/dev/null", "/dev/zero"}, id: "null", cdi: "example.com/pair=null",
		want: []cdiNode{{path: "/dev/null", mode: 0o666, access: "rwm"},
			{path: "/dev/zero", mode: 0o666, access: "rwm"}},
	}, {
		// "9x" is no CDI class (the library wants a letter first).
		name:   "a kind with a prefix",
		config: `{"name": "example.com/9x", "match": [{"path": "/dev/null"}]}`,
		nodes:  []string{"/dev/null"}, id: "null", cdi: "example.com/cdi-9x=null",
		want: []cdiNode{{path: "/dev/null", mode: 0o666, access: "rwm"}},
	}, {
		name: "annotations",
		config: `{"name": "example.com/annotated", "allocate": ["cdi-cri", "cdi-annotations"],
			"match": [{"path": "/dev/zero"}]}`,
		nodes: []string{"/dev/zero"}, id: "zero", cdi: "example.com/annotated=zero", annot: true,
		want: []cdiNode{{path: "/dev/zero", mode: 0o666, access: "rwm"}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newDaemon(t, `{"resources": [`+tc.config+`]}`)
			numbers := map[string][2]uint32{}
			for _, n := range tc.nodes {
				major, minor := cdiHostNode(t, d, n)
				numbers[n] = [2]uint32{major, minor}
			}
			kdir := cdiRegistrar(t)
			d.Start("--kubelet-dir", kdir, "--pod-resources-socket", "")
			plugin := cdiPlugin(t, kdir)
			if ids := cdiIDs(t, plugin); !cdiContains(ids, tc.id) {
				t.Fatalf("cdiplug lists %v, not %s", ids, tc.id)
			}
			cri, annotated := cdiAnswer(t, plugin, tc.id)
			if !reflect.DeepEqual(cri, []string{tc.cdi}) {
				t.Errorf("Allocate(%s) answers CDI devices %v, want [%s]", tc.id, cri, tc.cdi)
			}
			if tc.annot && !reflect.DeepEqual(annotated, []string{tc.cdi}) {
				t.Errorf("Allocate(%s) annotates %v, want [%s]", tc.id, annotated, tc.cdi)
			}
			cache := cdiLoadAll(t, d)
			for _, name := range append(cri, annotated...) {
				if cache.GetDevice(name) == nil {
					t.Errorf("%q does not resolve (the library has %v)", name, cache.ListDevices())
				}
			}

			spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
			if unresolved, err := cache.InjectDevices(spec, tc.cdi); err != nil {
				t.Fatalf("InjectDevices(%s): %v (unresolved %v)", tc.cdi, err, unresolved)
			}
			cdiCheckNodes(t, spec, tc.want, numbers)
			env := append([]string(nil), spec.Process.Env...)
			sort.Strings(env)
			if fmt.Sprint(env) != fmt.Sprint(tc.env) {
				t.Errorf("env %v, want %v", env, tc.env)
			}
			if fmt.Sprint(spec.Mounts) != fmt.Sprint(tc.mounts) {
				t.Errorf("mounts %+v, want %+v", spec.Mounts, tc.mounts)
			}
		})
	}
}

// cdiCheckNodes compares the spec's devices and cgroup rules with want.
func cdiCheckNodes(t *testing.T, spec *oci.Spec, want []cdiNode, numbers map[string][2]uint32) {
	t.Helper()
	if len(spec.Linux.Devices) != len(want) {
		t.Fatalf("the container gets devices %+v, want %d", spec.Linux.Devices, len(want))
	}
	var rules []oci.LinuxDeviceCgroup
	if spec.Linux.Resources != nil {
		rules = spec.Linux.Resources.Devices
	}
	if len(rules) != len(want) {
		t.Errorf("cgroup device rules %+v, want %d", rules, len(want))
	}
	for i, w := range want {
		got := spec.Linux.Devices[i]
		num := numbers[w.path]
		if got.Path != w.path || got.Type != "c" || got.Major != int64(num[0]) || got.Minor != int64(num[1]) {
			t.Errorf("device %d is %s %s %d:%d, want %s c %d:%d", i, got.Path, got.Type,
				got.Major, got.Minor, w.path, num[0], num[1])
		}
		if got.FileMode == nil || got.FileMode.Perm() != w.mode {
			t.Errorf("%s: file mode %v, want %v", w.path, got.FileMode, w.mode)
		}
		if fmt.Sprint(cdiDeref(got.UID), cdiDeref(got.GID)) != fmt.Sprint(cdiDeref(w.uid), cdiDeref(w.gid)) {
			t.Errorf("%s: owner %v:%v, want %v:%v", w.path, cdiDeref(got.UID), cdiDeref(got.GID),
				cdiDeref(w.uid), cdiDeref(w.gid))
		}
		if i < len(rules) {
			r := rules[i]
			if !r.Allow || r.Type != "c" || r.Major == nil || *r.Major != int64(num[0]) ||
				r.Minor == nil || *r.Minor != int64(num[1]) || r.Access != w.access {
				t.Errorf("%s: cgroup rule %+v, want allow c %d:%d %s", w.path, r, num[0], num[1], w.access)
			}
		}
	}
}

func cdiDeref(p *uint32) any {
	if p == nil {
		return "unset"
	}
	return *p
}

func cdiContains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestCDINames: node names outside the CDI name grammar (a '+', '@',
// space, non-ASCII, over-long) and a class with a '.': each node is
// reached through exactly one name that cdiplug answers Allocate with and
// the library resolves. (These nodes have no twin on this machine, so
// nothing is injected: the library would stat the host path.)
func TestCDINames(t *testing.T) {
	cases := []struct {
		name, resource string
		nodes          []string
	}{
		{"awkward node names", "example.com/weird", []string{"a+b@c", "x y", "é", "A_b", "tty:0.1",
			"long" + strings.Repeat("x", 120)}},
		{"a class with a dot", "example.com/serial.usb", []string{"ttyUSB0"}},
		{"a kind needing a prefix and a hash", "3com.com/x", []string{"n0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newDaemon(t, `{"resources": [{"name": "`+tc.resource+`",
				"match": [{"path": "/dev/weird/*"}]}]}`)
			for i, n := range tc.nodes {
				d.Mknod("dev/weird/"+n, uint32(100+i))
			}
			kdir := cdiRegistrar(t)
			d.Start("--kubelet-dir", kdir, "--pod-resources-socket", "")
			plugin := cdiPlugin(t, kdir)
			ids := cdiIDs(t, plugin)
			if len(ids) != len(tc.nodes) {
				t.Fatalf("cdiplug lists %v for %d nodes", ids, len(tc.nodes))
			}
			cache := cdiLoadAll(t, d)
			reached := map[string]string{} // node path -> CDI name
			for _, id := range ids {
				cri, _ := cdiAnswer(t, plugin, id)
				if len(cri) != 1 {
					t.Fatalf("Allocate(%s) answers %v", id, cri)
				}
				dev := cache.GetDevice(cri[0])
				if dev == nil {
					t.Errorf("Allocate(%s) answers %q, which does not resolve (the library has %v)",
						id, cri[0], cache.ListDevices())
					continue
				}
				for _, n := range dev.ContainerEdits.DeviceNodes {
					if other, dup := reached[n.Path]; dup {
						t.Errorf("%s reached by %q and %q", n.Path, other, cri[0])
					}
					reached[n.Path] = cri[0]
				}
			}
			for _, n := range tc.nodes {
				if _, ok := reached["/dev/weird/"+n]; !ok {
					t.Errorf("/dev/weird/%s is reached by no answered name (%v)", n, reached)
				}
			}
		})
	}
}

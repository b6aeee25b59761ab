// The agreement check: every object the reference makes, the chart makes
// too, with the same namespace, the same spec, rules, data (a config as
// parsed JSON) and selectors; the reference's labels and annotations among
// the chart's (which adds Helm's own).
package helm

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"testing"
)

// diff lists where b differs from a, by JSON path.
func diff(path string, a, b any) []string {
	switch av := a.(type) {
	case object:
		bv, ok := b.(object)
		if !ok {
			return []string{fmt.Sprintf("%s: %s, want %s", path, js(b), js(a))}
		}
		var out []string
		for _, k := range sortedKeys(av, bv) {
			out = append(out, diff(path+"."+k, av[k], bv[k])...)
		}
		return out
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return []string{fmt.Sprintf("%s: %s, want %s", path, js(b), js(a))}
		}
		var out []string
		for i := range av {
			out = append(out, diff(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(a, b) {
		return []string{fmt.Sprintf("%s: %s, want %s", path, js(b), js(a))}
	}
	return nil
}

func js(v any) string {
	if v == nil {
		return "absent"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func sortedKeys(a, b object) []string {
	seen := map[string]bool{}
	var ks []string
	for _, m := range []object{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				ks = append(ks, k)
			}
		}
	}
	sort.Strings(ks)
	return ks
}

// get walks a path of map keys and list indexes; nil when absent.
func get(v any, path ...any) any {
	for _, p := range path {
		switch p := p.(type) {
		case string:
			m, ok := v.(object)
			if !ok {
				return nil
			}
			v = m[p]
		case int:
			l, ok := v.([]any)
			if !ok || p >= len(l) {
				return nil
			}
			v = l[p]
		}
	}
	return v
}

// deepCopy copies a JSON value, so a case may edit a reference.
func deepCopy(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

// sortByName orders a list of named things (env, volumes, mounts): their
// order means nothing to the kubelet.
func sortByName(v any) {
	l, ok := v.([]any)
	if !ok {
		return
	}
	sort.SliceStable(l, func(i, j int) bool {
		return fmt.Sprint(get(l[i], "name")) < fmt.Sprint(get(l[j], "name"))
	})
}

// normalise puts an object into the form the comparison reads: a
// ConfigMap's config.json parsed, a pod's named lists sorted.
func normalise(t *testing.T, o object) object {
	t.Helper()
	o = deepCopy(o).(object)
	if o["kind"] == "ConfigMap" {
		if data, ok := o["data"].(object); ok {
			if text, ok := data["config.json"].(string); ok {
				var cfg any
				if err := json.Unmarshal([]byte(text), &cfg); err != nil {
					t.Errorf("%s: config.json is no JSON: %v", key(o), err)
				}
				data["config.json"] = cfg
			}
		}
	}
	if pod, ok := get(o, "spec", "template", "spec").(object); ok {
		sortByName(pod["volumes"])
		for _, c := range pod["containers"].([]any) {
			sortByName(get(c, "volumeMounts"))
			sortByName(get(c, "env"))
		}
	}
	return o
}

// subset: every key of want is in have with the same value.
func subset(path string, want, have any) []string {
	w, _ := want.(object)
	h, _ := have.(object)
	var out []string
	for k, v := range w {
		if !reflect.DeepEqual(h[k], v) {
			out = append(out, fmt.Sprintf("%s[%s]: %s, want %s", path, k, js(h[k]), js(v)))
		}
	}
	sort.Strings(out)
	return out
}

// agree compares one object the reference and the chart both make.
func agree(t *testing.T, ref, got object) {
	t.Helper()
	ref, got = normalise(t, ref), normalise(t, got)
	k := key(ref)
	var problems []string
	problems = append(problems, diff(k+".metadata.namespace", get(ref, "metadata", "namespace"),
		get(got, "metadata", "namespace"))...)
	for _, f := range []string{"labels", "annotations"} {
		problems = append(problems, subset(k+".metadata."+f, get(ref, "metadata", f), get(got, "metadata", f))...)
		problems = append(problems, subset(k+".spec.template.metadata."+f,
			get(ref, "spec", "template", "metadata", f), get(got, "spec", "template", "metadata", f))...)
	}
	// Everything but the metadata (the pod template's labels were
	// compared above as a subset): spec, rules, roleRef, subjects, data.
	r, g := deepCopy(ref).(object), deepCopy(got).(object)
	for _, o := range []object{r, g} {
		delete(o, "metadata")
		if tm, ok := get(o, "spec", "template", "metadata").(object); ok {
			delete(tm, "labels")
			delete(tm, "annotations")
		}
	}
	problems = append(problems, diff(k, r, g)...)
	for _, p := range problems {
		t.Errorf("chart differs: %s", p)
	}
}

package main

// What the API server's audit log (fleet.sh's policy: Metadata for the
// group system:nodes, nothing else, no RequestReceived stage) says about
// the instances' requests: one line per request (two for a watch: when it
// starts streaming and when it ends), with the user (system:node:NAME),
// the verb, the resource, the URI and the time the request came in.

import (
	"bufio"
	"encoding/json"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

type request struct {
	node     string
	verb     string // get, list, watch, create, update, patch, delete...
	resource string
	uri      string
	received time.Time
	started  time.Time // a watch: when it began streaming (ResponseStarted, 200)
}

// readAudit reads the log at path: one request per audit ID.
func readAudit(path string) ([]request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	byID := map[string]*request{}
	var order []*request
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev auditv1.Event
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue // a line cut by the API server's stop
		}
		node, ok := strings.CutPrefix(ev.User.Username, "system:node:")
		if !ok || ev.ObjectRef == nil {
			continue
		}
		r := byID[string(ev.AuditID)]
		if r == nil {
			r = &request{node: node, verb: ev.Verb, resource: ev.ObjectRef.Resource, uri: ev.RequestURI,
				received: ev.RequestReceivedTimestamp.Time}
			byID[string(ev.AuditID)] = r
			order = append(order, r)
		}
		if ev.Stage == auditv1.StageResponseStarted && ev.ResponseStatus != nil && ev.ResponseStatus.Code == 200 {
			r.started = ev.StageTimestamp.Time
		}
	}
	out := make([]request, len(order))
	for i, r := range order {
		out[i] = *r
	}
	return out, sc.Err()
}

// inWindow are the requests of nodes that came in within [from, to).
func inWindow(reqs []request, nodes map[string]int, from, to time.Time) []request {
	var out []request
	for _, r := range reqs {
		if _, ok := nodes[r.node]; ok && !r.received.Before(from) && r.received.Before(to) {
			out = append(out, r)
		}
	}
	return out
}

// byKind counts requests by "verb resource".
func byKind(reqs []request) map[string]int {
	out := map[string]int{}
	for _, r := range reqs {
		out[r.verb+" "+r.resource]++
	}
	return out
}

// watchTimeouts are the timeoutSeconds the watches asked for.
func watchTimeouts(reqs []request) []float64 {
	var out []float64
	for _, r := range reqs {
		if r.verb != "watch" {
			continue
		}
		if u, err := url.Parse(r.uri); err == nil {
			if s, err := strconv.Atoi(u.Query().Get("timeoutSeconds")); err == nil {
				out = append(out, float64(s))
			}
		}
	}
	return out
}

// watched are the resources each node had a watch streaming on before t.
func watched(reqs []request, before time.Time) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, r := range reqs {
		if r.verb == "watch" && !r.started.IsZero() && r.started.Before(before) {
			if out[r.node] == nil {
				out[r.node] = map[string]bool{}
			}
			out[r.node][r.resource] = true
		}
	}
	return out
}

// reconnects gives, for each node, its first request that came in at or
// after since, and the time by which a watch streamed again on every
// resource in kinds (the node's watches before the outage); a node whose
// watches are not all back has no entry in back.
func reconnects(reqs []request, since time.Time, kinds map[string]map[string]bool) (first, back map[string]time.Time) {
	first, back = map[string]time.Time{}, map[string]time.Time{}
	seen := map[string]map[string]time.Time{}
	for _, r := range reqs {
		if r.received.Before(since) {
			continue
		}
		if f, ok := first[r.node]; !ok || r.received.Before(f) {
			first[r.node] = r.received
		}
		if r.verb != "watch" || r.started.IsZero() {
			continue
		}
		if seen[r.node] == nil {
			seen[r.node] = map[string]time.Time{}
		}
		if s, ok := seen[r.node][r.resource]; !ok || r.started.Before(s) {
			seen[r.node][r.resource] = r.started
		}
	}
	for node, want := range kinds {
		var last time.Time
		all := true
		for res := range want {
			s, ok := seen[node][res]
			all = all && ok
			if s.After(last) {
				last = s
			}
		}
		if all {
			back[node] = last
		}
	}
	return first, back
}

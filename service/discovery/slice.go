package discovery

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
)

// What vipproxy follows: the one EndpointSlice the apiservers themselves
// write for the `kubernetes` service. kube-apiserver's endpoint reconciler
// (pkg/controlplane/reconcilers, EndpointsAdapter, v1.34) names it
// `kubernetes` in namespace default, sets its labels to exactly
// kubernetes.io/service-name=kubernetes (no managed-by label: no
// controller owns it), its addressType to IPv4 (IPv6 when every apiserver
// address is IPv6), and one endpoint per apiserver on port `https`. Any
// other slice with that label was written by someone else, and anyone
// allowed to create EndpointSlices in default could otherwise add
// backends to every node's VIP: it is never read.
const (
	Namespace    = "default"
	ServiceName  = "kubernetes"
	PortName     = "https"
	slicesPath   = "/apis/discovery.k8s.io/v1/namespaces/" + Namespace + "/endpointslices"
	serviceLabel = "kubernetes.io/service-name"
	selector     = serviceLabel + "=" + ServiceName
	// fieldSelector asks the apiserver for that one slice by name.
	fieldSelector = "metadata.name=" + ServiceName
	// managedByLabel names the controller that owns a slice; the
	// apiservers' own slice never carries it.
	managedByLabel = "endpointslice.kubernetes.io/managed-by"
)

// endpointSlice is the part of a discovery.k8s.io/v1 EndpointSlice that
// vipproxy reads; encoding/json ignores the rest.
type endpointSlice struct {
	Metadata struct {
		Name            string            `json:"name"`
		Namespace       string            `json:"namespace"`
		ResourceVersion string            `json:"resourceVersion"`
		Labels          map[string]string `json:"labels"`
	} `json:"metadata"`
	AddressType string `json:"addressType"`
	Endpoints   []struct {
		Addresses  []string `json:"addresses"`
		Conditions struct {
			// Ready nil means unknown, which the API says to read as ready.
			Ready *bool `json:"ready"`
		} `json:"conditions"`
	} `json:"endpoints"`
	Ports []struct {
		Name *string `json:"name"`
		Port *int32  `json:"port"`
	} `json:"ports"`
}

// sliceList is the answer to a list.
type sliceList struct {
	Kind     string `json:"kind"`
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Items []endpointSlice `json:"items"`
}

// watchEvent is one line of a watch stream.
type watchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// status is the object of an ERROR event and the body of a failed request.
type status struct {
	Kind    string `json:"kind"`
	Code    int    `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// foreign says why a slice is not the one the apiservers write, or "".
func (s *endpointSlice) foreign() string {
	m := &s.Metadata
	switch {
	case m.Name != ServiceName:
		return fmt.Sprintf("named %q, not %q", m.Name, ServiceName)
	case m.Namespace != "" && m.Namespace != Namespace:
		return fmt.Sprintf("in namespace %q", m.Namespace)
	case m.Labels[serviceLabel] != ServiceName:
		return "without the label " + selector
	case m.Labels[managedByLabel] != "":
		return fmt.Sprintf("labelled %s=%s, which the apiservers never write", managedByLabel, m.Labels[managedByLabel])
	case s.AddressType != "IPv4" && s.AddressType != "IPv6":
		return fmt.Sprintf("of addressType %q", s.AddressType)
	}
	return ""
}

// endpoints returns the ready endpoints of the slice on its `https` port.
// A slice without that port gives none.
func (s *endpointSlice) endpoints() []netip.AddrPort {
	var port uint16
	for _, p := range s.Ports {
		if p.Name != nil && *p.Name == PortName && p.Port != nil && *p.Port > 0 && *p.Port <= 65535 {
			port = uint16(*p.Port)
		}
	}
	if port == 0 {
		return nil
	}
	var out []netip.AddrPort
	for _, e := range s.Endpoints {
		if e.Conditions.Ready != nil && !*e.Conditions.Ready {
			continue
		}
		for _, a := range e.Addresses {
			if ip, err := netip.ParseAddr(a); err == nil {
				out = append(out, netip.AddrPortFrom(ip, port))
			}
		}
	}
	return out
}

// view is what the watcher knows of the slices: endpoints per slice name.
type view map[string][]netip.AddrPort

// union is every endpoint of every slice, deduplicated and sorted: one
// sort, linear in the endpoints.
func (v view) union() []netip.AddrPort {
	n := 0
	for _, eps := range v {
		n += len(eps)
	}
	out := make([]netip.AddrPort, 0, n)
	for _, eps := range v {
		out = append(out, eps...)
	}
	return sortUnique(out)
}

// apply folds one watch event into the view. It returns the new resource
// version and whether the endpoints changed (a bookmark, or a slice
// rewritten with the same endpoints, changes nothing), or an error for an
// ERROR event (gone is true for 410 Gone) or one it cannot read.
func (v view) apply(ev watchEvent) (rv string, changed, gone bool, err error) {
	switch ev.Type {
	case "ADDED", "MODIFIED", "DELETED", "BOOKMARK":
		var s endpointSlice
		if err := json.Unmarshal(ev.Object, &s); err != nil {
			return "", false, false, fmt.Errorf("read %s event: %w", ev.Type, err)
		}
		return s.Metadata.ResourceVersion, v.fold(ev.Type, &s), false, nil
	case "ERROR":
		var st status
		if err := json.Unmarshal(ev.Object, &st); err != nil {
			return "", false, false, fmt.Errorf("read ERROR event: %w", err)
		}
		return "", false, st.Code == 410, fmt.Errorf("watch ERROR %d %s: %s", st.Code, st.Reason, st.Message)
	default:
		return "", false, false, fmt.Errorf("unknown watch event type %q", ev.Type)
	}
}

// fold applies one object event and says whether the endpoints changed.
// A slice the apiservers did not write is never read.
func (v view) fold(typ string, s *endpointSlice) bool {
	name := s.Metadata.Name
	if typ != "BOOKMARK" && s.foreign() != "" {
		return false
	}
	old, had := v[name]
	switch typ {
	case "ADDED", "MODIFIED":
		eps := s.endpoints()
		v[name] = eps
		return !had || !slices.Equal(old, eps)
	case "DELETED":
		delete(v, name)
		return had
	}
	return false
}

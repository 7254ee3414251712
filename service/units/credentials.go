package units

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vipproxy/vipproxy/service/atomicfile"
	"github.com/vipproxy/vipproxy/service/config"
)

// CredentialsDropIn is vipproxy.service's drop-in that hands it the
// credential files the config names (LoadCredential=).
const CredentialsDropIn = "/etc/systemd/system/vipproxy.service.d/credentials.conf"

// CredentialSet is what one distribution hands vipproxy.service: the
// node's kubelet client certificate (any user the apiserver authenticates
// may read /readyz, and the group system:nodes may list the EndpointSlices
// with examples/rbac-discovery.yaml) and the CA that verifies the
// apiservers. Each distribution has names of its own, so the names a
// config uses say which set it needs.
type CredentialSet struct {
	Distribution string
	// Credentials are NAME and SOURCE of each LoadCredential=NAME:SOURCE.
	Credentials [][2]string
}

// CredentialSets are the shipped sets (examples/credentials/NAME.conf):
// kubeadm and k0s keep the kubelet's certificate and key in one PEM file,
// k3s and RKE2 in two.
func CredentialSets() []CredentialSet {
	return []CredentialSet{
		{"kubeadm", [][2]string{
			{"ca.crt", "/etc/kubernetes/pki/ca.crt"},
			{"kubelet-client.pem", "/var/lib/kubelet/pki/kubelet-client-current.pem"},
		}},
		{"k3s", [][2]string{
			{"k3s-server-ca.crt", "/var/lib/rancher/k3s/agent/server-ca.crt"},
			{"k3s-client-kubelet.crt", "/var/lib/rancher/k3s/agent/client-kubelet.crt"},
			{"k3s-client-kubelet.key", "/var/lib/rancher/k3s/agent/client-kubelet.key"},
		}},
		{"rke2", [][2]string{
			{"rke2-server-ca.crt", "/var/lib/rancher/rke2/agent/server-ca.crt"},
			{"rke2-client-kubelet.crt", "/var/lib/rancher/rke2/agent/client-kubelet.crt"},
			{"rke2-client-kubelet.key", "/var/lib/rancher/rke2/agent/client-kubelet.key"},
		}},
		{"k0s", [][2]string{
			{"k0s-ca.crt", "/var/lib/k0s/pki/ca.crt"},
			{"k0s-kubelet-client.pem", "/var/lib/k0s/kubelet/pki/kubelet-client-current.pem"},
		}},
	}
}

// credentialsHeader starts a rendered credentials drop-in: the file is
// the operator's to change (another CA, another certificate), and units
// write replaces only a file that starts with it.
const credentialsHeader = "# vipproxy.service's credentials, written by vipproxy units write: copies of\n" +
	"# root's files for its dynamic user, at /run/credentials/vipproxy.service/NAME\n" +
	"# (docs/distributions.md#check-credentials).\n"

// Render is the drop-in of the set, as examples/credentials/NAME.conf ships it.
func (s CredentialSet) Render() []byte {
	var b bytes.Buffer
	b.WriteString(credentialsHeader)
	fmt.Fprintf(&b, "# %s: the kubelet's client certificate and the cluster CA.\n[Service]\n", s.Distribution)
	for _, c := range s.Credentials {
		fmt.Fprintf(&b, "LoadCredential=%s:%s\n", c[0], c[1])
	}
	return b.Bytes()
}

// names are the set's credential names.
func (s CredentialSet) names() []string {
	out := make([]string, len(s.Credentials))
	for i, c := range s.Credentials {
		out[i] = c[0]
	}
	return out
}

// Credentials is the credentials drop-in for cfg, its path under root:
// the shipped set that gives every credential the config names. ok is
// false when the config names none; the error says which names no set
// gives, and what to write instead.
func Credentials(cfg *config.Valid, root string) (f atomicfile.File, ok bool, err error) {
	var names []string
	for _, c := range cfg.Credentials() {
		names = append(names, c.Name())
	}
	if len(names) == 0 {
		return atomicfile.File{}, false, nil
	}
	slices.Sort(names)
	names = slices.Compact(names)
	for _, s := range CredentialSets() {
		if !slices.ContainsFunc(names, func(n string) bool { return !slices.Contains(s.names(), n) }) {
			return atomicfile.File{Path: filepath.Join(rootOrSlash(root), CredentialsDropIn), Data: s.Render(), Perm: 0o644}, true, nil
		}
	}
	return atomicfile.File{}, false, fmt.Errorf("the config names the credentials %s, which no shipped set (examples/credentials/) gives together: write LoadCredential=NAME:SOURCE for each in %s",
		strings.Join(names, ", "), CredentialsDropIn)
}

// OwnCredentials reports whether the credentials drop-in at path is
// absent or one units write wrote, so writing it loses nothing the
// operator wrote.
func OwnCredentials(path string) bool {
	data, err := os.ReadFile(path)
	return err != nil || bytes.HasPrefix(data, []byte(credentialsHeader))
}

func rootOrSlash(root string) string {
	if root == "" {
		return "/"
	}
	return root
}

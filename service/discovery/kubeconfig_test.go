package discovery

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// Shapes of kubeconfig found on nodes, each read as kubectl reads it or
// refused by file line.
func TestKubeconfigShapes(t *testing.T) {
	head := "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context:\n    cluster: k\n    user: u\nclusters:\n- name: k\n  cluster:\n    server: https://192.0.2.10:6443\n"
	user := func(body string) string { return head + "users:\n- name: u\n  user:\n" + body }
	cases := []struct {
		name, file string
		want       string // parts as text, or "error: <text at a line>"
	}{
		{"plain", user("    token: abc\n"), "token=abc insecure=false"},
		{"two documents: the first, as kubectl", user("    token: first\n") + "---\n" + user("    token: second\n"), "token=first insecure=false"},
		{"anchor", user("    token: &t abc\n"), "token=abc insecure=false"},
		{"alias of no anchor", user("    token: *t\n"), "YAML: unknown anchor 't' referenced"},
		{"tab in indentation", user("\ttoken: abc\n"), "error: line 16: YAML: found character that cannot start any token"},
		{"quoted key", user("    \"token\": abc\n"), "token=abc insecure=false"},
		{"null", user("    client-certificate: null\n    token: abc\n"), "token=abc insecure=false"},
		{"quote then a comment with a quote", user("    token: 'x' # don't\n"), "token=x insecure=false"},
		{"plain value then a comment", user("    token: x # don't\n"), "token=x insecure=false"},
		{"duplicate user", user("    token: first\n") + "- name: u\n  user:\n    token: second\n", "error: line 17: users: two entries named \"u\""},
		{"duplicate key", user("    token: first\n    token: second\n"), "error: line 17: YAML: key \"token\" already set in map"},
		{"string true is not a boolean", strings.Replace(user("    token: abc\n"), "    server:", "    insecure-skip-tls-verify: \"true\"\n    server:", 1),
			"error: line 12: insecure-skip-tls-verify is a YAML string"},
		{"YAML 1.1 yes is a boolean", strings.Replace(user("    token: abc\n"), "    server:", "    insecure-skip-tls-verify: yes\n    server:", 1),
			"token=abc insecure=true"},
		{"a number is not a string", user("    token: 0x1F\n"), "error: line 16: token is a YAML number"},
		{"a boolean is not a string", user("    token: on\n"), "error: line 16: token is a YAML boolean"},
		{"a token that only looks numeric", user("    token: 123456.abcdef0123456789\n"), "token=123456.abcdef0123456789 insecure=false"},
		{"escapes", user("    token: \"a\\tb\"\n"), "token=a\tb insecure=false"},
	}
	dir := t.TempDir()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			writeFile(t, path, tc.file)
			p, err := kubeconfigParts(path)
			got := ""
			if err != nil {
				got = "error: " + strings.TrimPrefix(err.Error(), path+":")
				got = strings.Replace(got, "error: ", "error: line ", 1)
			} else {
				got = "token=" + string(p.token.data) + " insecure=" + map[bool]string{true: "true", false: "false"}[p.insecure]
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("got  %q\nwant ...%q...", got, tc.want)
			}
		})
	}
}

// kubectlConfig mirrors client-go's clientcmd/api/v1 Config, the types
// `kubectl config set-*` writes through sigs.k8s.io/yaml.
type kubectlConfig struct {
	Kind           string         `json:"kind,omitempty"`
	APIVersion     string         `json:"apiVersion,omitempty"`
	Preferences    struct{}       `json:"preferences"`
	Clusters       []namedCluster `json:"clusters"`
	AuthInfos      []namedUser    `json:"users"`
	Contexts       []namedContext `json:"contexts"`
	CurrentContext string         `json:"current-context"`
}

type namedCluster struct {
	Name    string `json:"name"`
	Cluster struct {
		Server                   string `json:"server"`
		TLSServerName            string `json:"tls-server-name,omitempty"`
		InsecureSkipTLSVerify    bool   `json:"insecure-skip-tls-verify,omitempty"`
		CertificateAuthority     string `json:"certificate-authority,omitempty"`
		CertificateAuthorityData []byte `json:"certificate-authority-data,omitempty"`
	} `json:"cluster"`
}

type namedUser struct {
	Name string `json:"name"`
	User struct {
		ClientCertificate     string `json:"client-certificate,omitempty"`
		ClientCertificateData []byte `json:"client-certificate-data,omitempty"`
		ClientKey             string `json:"client-key,omitempty"`
		ClientKeyData         []byte `json:"client-key-data,omitempty"`
		Token                 string `json:"token,omitempty"`
		TokenFile             string `json:"tokenFile,omitempty"`
	} `json:"user"`
}

type namedContext struct {
	Name    string `json:"name"`
	Context struct {
		Cluster   string `json:"cluster"`
		AuthInfo  string `json:"user"`
		Namespace string `json:"namespace,omitempty"`
	} `json:"context"`
}

// kubectlWrites is what `kubectl config set-cluster`, `set-credentials`,
// `set-context` and `use-context` write: client-go's v1 Config marshalled
// by sigs.k8s.io/yaml (keys sorted, empty lists as null).
func kubectlWrites(t testing.TB) map[string][]byte {
	var fresh kubectlConfig
	fresh.Kind, fresh.APIVersion = "Config", "v1"
	var c namedCluster
	c.Name, c.Cluster.Server, c.Cluster.InsecureSkipTLSVerify, c.Cluster.TLSServerName = "vip", "https://192.0.2.10:6443", true, "kubernetes"
	onlyCluster := fresh
	onlyCluster.Clusters = []namedCluster{c}
	var u namedUser
	u.Name, u.User.Token, u.User.ClientCertificateData, u.User.ClientKeyData = "vipproxy", "123: odd 'token' #", []byte("cert"), []byte("key")
	var x namedContext
	x.Name, x.Context.Cluster, x.Context.AuthInfo, x.Context.Namespace = "vipproxy@vip", "vip", "vipproxy", "default"
	full := onlyCluster
	full.AuthInfos, full.Contexts, full.CurrentContext = []namedUser{u}, []namedContext{x}, "vipproxy@vip"
	out := map[string][]byte{}
	for name, cfg := range map[string]kubectlConfig{"kubectl-set-cluster": onlyCluster, "kubectl-set-all": full} {
		data, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = data
	}
	return out
}

// corpus is every kubeconfig shape the distributions write.
func corpus(t testing.TB) map[string][]byte {
	out := kubectlWrites(t)
	files, _ := filepath.Glob("testdata/kubeconfig/*")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = data
	}
	if len(out) < 10 {
		t.Fatalf("corpus of %d files", len(out))
	}
	return out
}

// The kubeconfigs kubeadm, k3s, RKE2, k0s, kind and kubectl write parse
// and name a cluster and a user.
func TestKubeconfigCorpus(t *testing.T) {
	for name, data := range corpus(t) {
		t.Run(name, func(t *testing.T) {
			if name == "kubectl-set-cluster" {
				return // no context yet
			}
			if _, err := partsOf(data, "/"); err != nil {
				t.Fatalf("%v\n%s", err, data)
			}
		})
	}
	p, err := partsOf(kubectlWrites(t)["kubectl-set-all"], "/")
	if err != nil || string(p.token.data) != "123: odd 'token' #" || !p.insecure || p.serverName != "kubernetes" || string(p.cert.data) != "cert" {
		t.Errorf("kubectl's own file read as %+v, %v", p, err)
	}
}

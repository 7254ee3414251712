package discovery

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml" // kubectl's YAML library; tests only: the binary does not link it
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
		{"two documents", user("    token: first\n") + "---\n" + user("    token: second\n"), "error: line 17: a second YAML document"},
		{"anchor", user("    token: &t abc\n"), "error: line 16: YAML block scalars, flow collections, anchors"},
		{"alias", user("    token: *t\n"), "error: line 16: YAML block scalars, flow collections, anchors"},
		{"tab in indentation", user("\ttoken: abc\n"), "error: line 16: tab in indentation"},
		{"quoted key", user("    \"token\": abc\n"), "token=abc insecure=false"},
		{"null", user("    client-certificate: null\n    token: abc\n"), "token=abc insecure=false"},
		{"quote then a comment with a quote", user("    token: 'x' # don't\n"), "token=x insecure=false"},
		{"plain value then a comment", user("    token: x # don't\n"), "token=x insecure=false"},
		{"duplicate user", user("    token: first\n") + "- name: u\n  user:\n    token: second\n", "error: line 17: users: two entries named \"u\""},
		{"duplicate key", user("    token: first\n    token: second\n"), "error: line 17: key \"token\" appears twice"},
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
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("got  %q\nwant %q...", got, tc.want)
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

// The kubeconfigs kubeadm, k3s, RKE2, k0s, kind and kubectl write parse,
// give the same tree as kubectl's YAML library, and name a cluster and a
// user.
func TestKubeconfigCorpus(t *testing.T) {
	for name, data := range corpus(t) {
		t.Run(name, func(t *testing.T) {
			if msg := differ(data); msg != "" {
				t.Fatal(msg)
			}
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

// differ compares parseKubeconfig with kubectl's YAML library on data:
// where ours reads a file, the library must read the same tree; where ours
// refuses a YAML file, it names the line. "" when they agree.
func differ(data []byte) string {
	ours, err := parseKubeconfig(data)
	if err != nil {
		var le *lineError
		yamlInput := !bytes.HasPrefix(bytes.TrimSpace(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))), []byte("{"))
		if yamlInput && err.Error() != "empty file" && (!errors.As(err, &le) || le.line <= 0) {
			return "a refusal without a line: " + err.Error()
		}
		return ""
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return "ours read it, kubectl's YAML library refuses it: " + err.Error()
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var theirs any
	if err := dec.Decode(&theirs); err != nil {
		return "decode the library's JSON: " + err.Error()
	}
	if !sameTree(ours.root, theirs) {
		o, _ := json.Marshal(ours.root)
		return "trees differ:\n ours   " + string(o) + "\n theirs " + string(j)
	}
	return ""
}

// sameTree compares our tree with the library's decoded JSON; a yamlNumber
// matches any JSON number (both refuse it where a string goes).
func sameTree(ours, theirs any) bool {
	switch o := ours.(type) {
	case map[string]any:
		t, ok := theirs.(map[string]any)
		if !ok || len(t) != len(o) {
			return false
		}
		for k, v := range o {
			if tv, ok := t[k]; !ok || !sameTree(v, tv) {
				return false
			}
		}
		return true
	case []any:
		t, ok := theirs.([]any)
		if !ok || len(t) != len(o) {
			return false
		}
		for i := range o {
			if !sameTree(o[i], t[i]) {
				return false
			}
		}
		return true
	case yamlNumber:
		_, ok := theirs.(json.Number)
		return ok
	}
	return ours == theirs
}

// FuzzKubeconfigAgainstYAML holds the kubeconfig reader to kubectl's YAML
// library: never a panic, never a tree the library would read otherwise,
// and a refusal of YAML always names its line.
func FuzzKubeconfigAgainstYAML(f *testing.F) {
	for _, data := range corpus(f) {
		f.Add(data)
	}
	for _, s := range []string{"a: b\n", "- a\n- b: c\n  d: e\n", "x:\n- y:\n  - z\n", "a: 'b''c'\nd: \"e\\n\"\n", "{\"a\":1}",
		"a:\n\tb: c\n", "- - - a\n", "a: yes\nb: 0x10\nc: 1_000\nd: .5\ne: ~\n", "a: &x b\n", "---\na: b\n---\nc: d\n",
		"\"k\": 'v' # c\n", "a: b # c\nd:\n  - e # f\n  -\n  - g: h\n    i: j\n"} {
		f.Add([]byte(s))
	}
	// Keys past YAML's 1,024 characters with a colon early in them: the
	// bound counts to the key's end, not to its first colon.
	long := strings.Repeat("b", 1100)
	f.Add([]byte("a:" + long + " c: d\n"))
	f.Add([]byte("\"a:" + long + "\": d\n"))
	f.Add([]byte("a: \"caf\\xe9 \\x41\"\n")) // YAML's \xNN is a character, not a byte
	f.Fuzz(func(t *testing.T, data []byte) {
		if msg := differ(data); msg != "" {
			t.Fatalf("%s\ninput: %q", msg, data)
		}
	})
}

package discovery

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A kubeadm-style kubeconfig (inline data, a sequence at the same
// indentation as its key) and a k3s-style one (files, indented sequences,
// quotes, comments) both reach the stand-in.
func TestKubeconfig(t *testing.T) {
	a := newAPI(t)
	a.slices.SetAddrs(ap("192.0.2.1:6443"))
	dir := t.TempDir()
	b64 := func(path string) string {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(data)
	}
	copyFile(t, a.pki.ClientCert, filepath.Join(dir, "client.crt"))
	copyFile(t, a.pki.ClientKey, filepath.Join(dir, "client.key"))
	copyFile(t, a.pki.CA, filepath.Join(dir, "ca.crt"))
	writeFile(t, filepath.Join(dir, "token"), "tok\n")
	configs := map[string]string{
		"kubeadm": `apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: ` + b64(a.pki.CA) + `
    server: https://192.0.2.10:6443
  name: kubernetes
contexts:
- context:
    cluster: kubernetes
    user: kubernetes-admin
  name: kubernetes-admin@kubernetes
current-context: kubernetes-admin@kubernetes
kind: Config
preferences: {}
users:
- name: kubernetes-admin
  user:
    client-certificate-data: ` + b64(a.pki.ClientCert) + `
    client-key-data: ` + b64(a.pki.ClientKey) + `
`,
		"files": `# written by hand
apiVersion: v1
kind: Config
clusters:
  - name: "default"
    cluster:
      server: "https://192.0.2.10:6443"   # the VIP: never used
      certificate-authority: ca.crt
      tls-server-name: 'kubernetes'
users:
  - name: other
    user:
      token: wrong
  - name: default
    user:
      client-certificate: ` + filepath.Join(dir, "client.crt") + `
      client-key: client.key
contexts:
  - name: default
    context: {}
  - name: main
    context:
      cluster: default
      user: default
current-context: main
`,
		"token": `{"apiVersion":"v1","kind":"Config","current-context":"c",
"clusters":[{"name":"k","cluster":{"certificate-authority":"ca.crt"}}],
"users":[{"name":"u","user":{"tokenFile":"token"}}],
"contexts":[{"name":"c","context":{"cluster":"k","user":"u"}}]}`,
	}
	for name, body := range configs {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".conf")
			writeFile(t, path, body)
			_, ch := run(t, Options{Credentials: Credentials{Kubeconfig: path}, Seeds: []string{a.addr()}, Policy: Policy{Grace: time.Hour}})
			waitFor(t, ch, []string{"192.0.2.1:6443"}, nil)
		})
	}
	tokens, _, _ := a.seen()
	if !strings.Contains(strings.Join(tokens, ","), "tok") {
		t.Errorf("the tokenFile was not sent: %q", tokens)
	}
}

func TestKubeconfigErrors(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"text for a list": "current-context: c\ncontexts:\n- name: c\n  context:\n    cluster: k\n    user: u\nclusters: |\n  x\n",
		"no context":      "apiVersion: v1\ncurrent-context: nope\ncontexts:\n- name: other\n  context: {}\n",
		"exec plugin":     "current-context: c\ncontexts:\n- name: c\n  context:\n    cluster: k\n    user: u\nclusters:\n- name: k\n  cluster: {}\nusers:\n- name: u\n  user:\n    exec:\n      command: aws\n",
		"bad base64":      "current-context: c\ncontexts:\n- name: c\n  context:\n    cluster: k\n    user: u\nclusters:\n- name: k\n  cluster:\n    certificate-authority-data: '%%%'\nusers:\n- name: u\n  user:\n    token: x\n",
		"not a key":       "apiVersion v1\n",
		"anonymous user":  "current-context: c\ncontexts:\n- name: c\n  context:\n    cluster: k\n    user: u\nclusters:\n- name: k\n  cluster: {}\nusers:\n- name: u\n  user: {}\n",
	}
	want := map[string]string{
		"text for a list": "text-for-a-list:7: clusters is not a list", "no context": `no entry named "nope"`, "exec plugin": "exec",
		"bad base64": "not base64", "not a key": "not-a-key:1: a kubeconfig is a mapping at the top (expected `key: value`)", "anonymous user": "anonymous",
	}
	for name, body := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		writeFile(t, path, body)
		_, err := Credentials{Kubeconfig: path}.load()
		if err == nil || !strings.Contains(err.Error(), want[name]) {
			t.Errorf("%s: got %v, want an error with %q", name, err, want[name])
		}
	}
}

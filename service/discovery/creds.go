package discovery

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vipproxy/vipproxy/service/regularfile"
)

// DefaultServerName is the name every apiserver certificate carries (the
// `kubernetes` service's DNS name), used when nothing else names one: the
// API is reached by the backends' addresses, not by its own server URL.
const DefaultServerName = "kubernetes"

// maxCredentialFile bounds every file read for credentials.
const maxCredentialFile = 1 << 20

// Credentials say how to verify the API and prove who we are: a
// kubeconfig file, or a CA file with a client certificate and key and/or a
// bearer-token file. Every file is read again for each connection, so a
// rotated certificate or token is used from the next request on.
type Credentials struct {
	Kubeconfig string
	CAFile     string
	CertFile   string
	KeyFile    string
	TokenFile  string
	// ServerName overrides the TLS name to verify; default: the
	// kubeconfig's tls-server-name, else DefaultServerName.
	ServerName string
}

// material is what one connection uses.
type material struct {
	tls   *tls.Config
	token string
}

// pem holds one piece of PEM or token: inline data, or a file to read.
type source struct {
	data []byte
	file string
}

func (s source) read() ([]byte, error) {
	if s.file == "" {
		return s.data, nil
	}
	return readFile(s.file)
}

// parts are the credentials resolved to sources.
type parts struct {
	ca, cert, key, token source
	serverName           string
	insecure             bool
}

// Check reads the credentials as a request would: the kubeconfig parsed,
// every file it names read (regular files only), the key pair matched.
func (c Credentials) Check() error {
	_, err := c.load()
	return err
}

// load reads every credential as it is on disk now.
func (c Credentials) load() (*material, error) {
	p, err := c.parts()
	if err != nil {
		return nil, err
	}
	if c.ServerName != "" {
		p.serverName = c.ServerName
	}
	if p.serverName == "" {
		p.serverName = DefaultServerName
	}
	return p.material()
}

func (c Credentials) parts() (parts, error) {
	if c.Kubeconfig != "" {
		p, err := kubeconfigParts(c.Kubeconfig)
		if err != nil {
			return parts{}, fmt.Errorf("kubeconfig %s: %w", c.Kubeconfig, err)
		}
		return p, nil
	}
	return parts{ca: source{file: c.CAFile}, cert: source{file: c.CertFile}, key: source{file: c.KeyFile}, token: source{file: c.TokenFile}}, nil
}

func (p parts) material() (*material, error) {
	cfg := &tls.Config{ServerName: p.serverName, MinVersion: tls.VersionTLS12, InsecureSkipVerify: p.insecure}
	ca, err := p.ca.read()
	if err != nil {
		return nil, fmt.Errorf("CA: %w", err)
	}
	if len(ca) > 0 {
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("CA %s: no PEM certificate", nameOf(p.ca))
		}
	}
	cert, err := p.cert.read()
	if err != nil {
		return nil, fmt.Errorf("client certificate: %w", err)
	}
	key, err := p.key.read()
	if err != nil {
		return nil, fmt.Errorf("client key: %w", err)
	}
	if len(cert) > 0 || len(key) > 0 {
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("client certificate %s and key %s: %w", nameOf(p.cert), nameOf(p.key), err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	token, err := p.token.read()
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	m := &material{tls: cfg, token: strings.TrimSpace(string(token))}
	if m.token == "" && len(cfg.Certificates) == 0 {
		return nil, errors.New("no client certificate and no token: the API would see an anonymous user")
	}
	return m, nil
}

func nameOf(s source) string {
	if s.file != "" {
		return s.file
	}
	return "(inline data)"
}

// readFile reads a credential, kubeconfig or state file: a regular file,
// opened without blocking (a FIFO there hung the start and the stop).
func readFile(path string) ([]byte, error) {
	return regularfile.Read(path, maxCredentialFile)
}

// kubeconfigParts reads the current context's cluster and user. Relative
// file names are relative to the kubeconfig's directory, as kubectl has it.
func kubeconfigParts(path string) (parts, error) {
	data, err := readFile(path)
	if err != nil {
		return parts{}, err
	}
	doc, err := parseKubeconfig(data)
	if err != nil {
		return parts{}, err
	}
	current := str(doc, "current-context")
	ctx, err := named(doc, "contexts", "context", current)
	if err != nil {
		return parts{}, err
	}
	cluster, err := named(doc, "clusters", "cluster", str(ctx, "cluster"))
	if err != nil {
		return parts{}, err
	}
	user, err := named(doc, "users", "user", str(ctx, "user"))
	if err != nil {
		return parts{}, err
	}
	if _, ok := user["exec"]; ok {
		return parts{}, errors.New("users[].user.exec (credential plugins) is not supported: use a client certificate or a token")
	}
	dir := filepath.Dir(path)
	var p parts
	p.serverName = str(cluster, "tls-server-name")
	p.insecure = str(cluster, "insecure-skip-tls-verify") == "true"
	for _, f := range []struct {
		dst        *source
		m          map[string]any
		data, file string
	}{
		{&p.ca, cluster, "certificate-authority-data", "certificate-authority"},
		{&p.cert, user, "client-certificate-data", "client-certificate"},
		{&p.key, user, "client-key-data", "client-key"},
	} {
		if *f.dst, err = dataOrFile(f.m, f.data, f.file, dir); err != nil {
			return parts{}, err
		}
	}
	p.token = source{data: []byte(str(user, "token"))}
	if tf := str(user, "tokenFile"); tf != "" && str(user, "token") == "" {
		p.token = source{file: abs(dir, tf)}
	}
	return p, nil
}

func dataOrFile(m map[string]any, dataKey, fileKey, dir string) (source, error) {
	if d := str(m, dataKey); d != "" {
		raw, err := base64.StdEncoding.DecodeString(d)
		if err != nil {
			return source{}, fmt.Errorf("%s: not base64: %w", dataKey, err)
		}
		return source{data: raw}, nil
	}
	if f := str(m, fileKey); f != "" {
		return source{file: abs(dir, f)}, nil
	}
	return source{}, nil
}

func abs(dir, f string) string {
	if filepath.IsAbs(f) {
		return f
	}
	return filepath.Join(dir, f)
}

// named finds list[i][field] where list[i].name == name (the kubeconfig's
// way of naming clusters, users and contexts); an empty name takes the
// only entry if there is one.
func named(doc map[string]any, list, field, name string) (map[string]any, error) {
	items, _ := doc[list].([]any)
	if name == "" && len(items) == 1 {
		m, _ := items[0].(map[string]any)
		inner, _ := m[field].(map[string]any)
		return inner, nil
	}
	for _, it := range items {
		m, _ := it.(map[string]any)
		if m != nil && str(m, "name") == name {
			inner, _ := m[field].(map[string]any)
			if inner == nil {
				return map[string]any{}, nil
			}
			return inner, nil
		}
	}
	return nil, fmt.Errorf("%s: no entry named %q (current-context and its references)", list, name)
}

// str reads a string, or a bool written as JSON true/false, from a map.
func str(m map[string]any, key string) string {
	switch v := m[key].(type) {
	case string:
		return v
	case bool:
		if v {
			return "true"
		}
		return "false"
	}
	return ""
}

func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }

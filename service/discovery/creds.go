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
		return kubeconfigParts(c.Kubeconfig)
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
// An error names the file and line.
func kubeconfigParts(path string) (parts, error) {
	data, err := readFile(path)
	if err != nil {
		return parts{}, err
	}
	p, err := partsOf(data, filepath.Dir(path))
	var le *lineError
	if errors.As(err, &le) && le.line > 0 {
		return parts{}, fmt.Errorf("%s:%d: %s", path, le.line, le.msg)
	}
	if err != nil {
		return parts{}, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return p, nil
}

func partsOf(data []byte, dir string) (parts, error) {
	doc, err := parseKubeconfig(data)
	if err != nil {
		return parts{}, err
	}
	current, err := doc.str(doc.root, "", "current-context")
	if err != nil {
		return parts{}, err
	}
	ctx, ctxPath, err := doc.named("contexts", "context", current)
	if err != nil {
		return parts{}, err
	}
	clusterName, err := doc.str(ctx, ctxPath, "cluster")
	if err != nil {
		return parts{}, err
	}
	userName, err := doc.str(ctx, ctxPath, "user")
	if err != nil {
		return parts{}, err
	}
	cluster, clusterPath, err := doc.named("clusters", "cluster", clusterName)
	if err != nil {
		return parts{}, err
	}
	user, userPath, err := doc.named("users", "user", userName)
	if err != nil {
		return parts{}, err
	}
	return doc.parts(cluster, clusterPath, user, userPath, dir)
}

// parts reads the TLS and credential fields of a cluster and a user.
func (d *yamlDoc) parts(cluster map[string]any, clusterPath string, user map[string]any, userPath, dir string) (parts, error) {
	for _, k := range []string{"exec", "auth-provider"} {
		if _, ok := user[k]; ok {
			return parts{}, d.errAt(userPath+"."+k, "users[].user.%s (credential plugins) is not supported: use a client certificate or a token", k)
		}
	}
	var p parts
	var err error
	if p.serverName, err = d.str(cluster, clusterPath, "tls-server-name"); err != nil {
		return parts{}, err
	}
	if p.insecure, err = d.boolean(cluster, clusterPath, "insecure-skip-tls-verify"); err != nil {
		return parts{}, err
	}
	for _, f := range []struct {
		dst              *source
		m                map[string]any
		path, data, file string
	}{
		{&p.ca, cluster, clusterPath, "certificate-authority-data", "certificate-authority"},
		{&p.cert, user, userPath, "client-certificate-data", "client-certificate"},
		{&p.key, user, userPath, "client-key-data", "client-key"},
	} {
		if *f.dst, err = d.dataOrFile(f.m, f.path, f.data, f.file, dir); err != nil {
			return parts{}, err
		}
	}
	token, err := d.str(user, userPath, "token")
	if err != nil {
		return parts{}, err
	}
	tokenFile, err := d.str(user, userPath, "tokenFile")
	if err != nil {
		return parts{}, err
	}
	p.token = source{data: []byte(token)}
	if tokenFile != "" && token == "" {
		p.token = source{file: abs(dir, tokenFile)}
	}
	return p, nil
}

func (d *yamlDoc) dataOrFile(m map[string]any, path, dataKey, fileKey, dir string) (source, error) {
	data, err := d.str(m, path, dataKey)
	if err != nil {
		return source{}, err
	}
	if data != "" {
		raw, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return source{}, d.errAt(path+"."+dataKey, "%s: not base64: %v", dataKey, err)
		}
		return source{data: raw}, nil
	}
	file, err := d.str(m, path, fileKey)
	if file == "" || err != nil {
		return source{}, err
	}
	return source{file: abs(dir, file)}, nil
}

func abs(dir, f string) string {
	if filepath.IsAbs(f) {
		return f
	}
	return filepath.Join(dir, f)
}

// named finds doc[list][i][field] where doc[list][i].name == name (the
// kubeconfig's way of naming clusters, users and contexts) and its path.
// Two entries of one name are refused, as kubectl refuses them; an empty
// name takes the only entry if there is one.
func (d *yamlDoc) named(list, field, name string) (map[string]any, string, error) {
	items, ok := d.root[list].([]any)
	if !ok && d.root[list] != nil {
		return nil, "", d.errAt(list, "%s is not a list", list)
	}
	found, at := -1, ""
	seen := map[string]bool{}
	for i, it := range items {
		m, ok := it.(map[string]any)
		itemPath := fmt.Sprintf("%s[%d]", list, i)
		if !ok {
			return nil, "", d.errAt(list, "%s[%d] is not a mapping", list, i)
		}
		n, err := d.str(m, itemPath, "name")
		if err != nil {
			return nil, "", err
		}
		if seen[n] {
			return nil, "", d.errAt(itemPath+".name", "%s: two entries named %q (kubectl refuses the file)", list, n)
		}
		seen[n] = true
		if n == name || (name == "" && len(items) == 1) {
			found, at = i, itemPath
		}
	}
	if found < 0 {
		return nil, "", fmt.Errorf("%s: no entry named %q (current-context and its references)", list, name)
	}
	inner := items[found].(map[string]any)[field]
	switch inner := inner.(type) {
	case nil:
		return map[string]any{}, at + "." + field, nil
	case map[string]any:
		return inner, at + "." + field, nil
	}
	return nil, "", d.errAt(at+"."+field, "%s.%s is not a mapping", at, field)
}

// str reads a string: a missing key or null is "", anything else that is
// not a string (a YAML boolean or number) is refused, as kubectl refuses it.
func (d *yamlDoc) str(m map[string]any, path, key string) (string, error) {
	switch v := m[key].(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	default:
		return "", d.errAt(path+"."+key, "%s is a YAML %s (%v), not a string, and kubectl refuses it: quote the value", key, typeName(v), v)
	}
}

// boolean reads a boolean: only YAML's booleans (true, false, and YAML
// 1.1's yes/no/on/off as kubectl's YAML library reads them); the string
// "true" is refused, as kubectl refuses it.
func (d *yamlDoc) boolean(m map[string]any, path, key string) (bool, error) {
	switch v := m[key].(type) {
	case nil:
		return false, nil
	case bool:
		return v, nil
	default:
		return false, d.errAt(path+"."+key, "%s is a YAML %s (%q), not a boolean, and kubectl refuses it: write true or false without quotes", key, typeName(v), fmt.Sprint(v))
	}
}

func typeName(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case yamlNumber:
		return "number"
	case []any:
		return "list"
	case map[string]any:
		return "mapping"
	}
	return fmt.Sprintf("%T", v)
}

// errAt is a refusal at the line of the key at path.
func (d *yamlDoc) errAt(path, format string, args ...any) error {
	return errorAt(d.lines[strings.TrimPrefix(path, ".")], format, args...)
}

func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }

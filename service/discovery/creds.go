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
	ctx, ctxPath := doc.named("contexts", "context", doc.str(doc.root, "", "current-context"))
	clusterName, userName := doc.str(ctx, ctxPath, "cluster"), doc.str(ctx, ctxPath, "user")
	cluster, clusterPath := doc.named("clusters", "cluster", clusterName)
	user, userPath := doc.named("users", "user", userName)
	if doc.err != nil {
		return parts{}, doc.err
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
	p := parts{
		serverName: d.str(cluster, clusterPath, "tls-server-name"),
		insecure:   d.boolean(cluster, clusterPath, "insecure-skip-tls-verify"),
		ca:         d.dataOrFile(cluster, clusterPath, "certificate-authority-data", "certificate-authority", dir),
		cert:       d.dataOrFile(user, userPath, "client-certificate-data", "client-certificate", dir),
		key:        d.dataOrFile(user, userPath, "client-key-data", "client-key", dir),
	}
	token, tokenFile := d.str(user, userPath, "token"), d.str(user, userPath, "tokenFile")
	p.token = source{data: []byte(token)}
	if tokenFile != "" && token == "" {
		p.token = source{file: abs(dir, tokenFile)}
	}
	if d.err != nil {
		return parts{}, d.err
	}
	return p, nil
}

func (d *yamlDoc) dataOrFile(m map[string]any, path, dataKey, fileKey, dir string) source {
	if data := d.str(m, path, dataKey); data != "" {
		raw, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			d.fail(d.errAt(path+"."+dataKey, "%s: not base64: %v", dataKey, err))
		}
		return source{data: raw}
	}
	if file := d.str(m, path, fileKey); file != "" {
		return source{file: abs(dir, file)}
	}
	return source{}
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
func (d *yamlDoc) named(list, field, name string) (map[string]any, string) {
	items, ok := d.root[list].([]any)
	if !ok && d.root[list] != nil {
		return d.fail(d.errAt(list, "%s is not a list", list)), ""
	}
	found, at := -1, ""
	seen := map[string]bool{}
	for i, it := range items {
		m, ok := it.(map[string]any)
		itemPath := fmt.Sprintf("%s[%d]", list, i)
		if !ok {
			return d.fail(d.errAt(list, "%s[%d] is not a mapping", list, i)), ""
		}
		n := d.str(m, itemPath, "name")
		if seen[n] {
			return d.fail(d.errAt(itemPath+".name", "%s: two entries named %q (kubectl refuses the file)", list, n)), ""
		}
		seen[n] = true
		if n == name || (name == "" && len(items) == 1) {
			found, at = i, itemPath
		}
	}
	if found < 0 {
		return d.fail(fmt.Errorf("%s: no entry named %q (current-context and its references)", list, name)), ""
	}
	switch inner := items[found].(map[string]any)[field].(type) {
	case nil:
		return map[string]any{}, at + "." + field
	case map[string]any:
		return inner, at + "." + field
	}
	return d.fail(d.errAt(at+"."+field, "%s.%s is not a mapping", at, field)), ""
}

// str reads a string: a missing key or null is "", anything else that is
// not a string (a YAML boolean or number) is refused, as kubectl refuses it.
func (d *yamlDoc) str(m map[string]any, path, key string) string {
	return scalar[string](d, m, key, func(v any) error {
		return d.errAt(path+"."+key, "%s is a YAML %s (%v), not a string, and kubectl refuses it: quote the value", key, typeName(v), v)
	})
}

// boolean reads a boolean: only YAML's booleans (true, false, and YAML
// 1.1's yes/no/on/off as kubectl's YAML library reads them); the string
// "true" is refused, as kubectl refuses it.
func (d *yamlDoc) boolean(m map[string]any, path, key string) bool {
	return scalar[bool](d, m, key, func(v any) error {
		return d.errAt(path+"."+key, "%s is a YAML %s (%q), not a boolean, and kubectl refuses it: write true or false without quotes", key, typeName(v), fmt.Sprint(v))
	})
}

// scalar reads a T at key of m: a missing key or null is T's zero value;
// any other value that is not a T is refused with the error refused makes
// of it.
func scalar[T string | bool](d *yamlDoc, m map[string]any, key string, refused func(v any) error) T {
	switch v := m[key].(type) {
	case nil:
	case T:
		return v
	default:
		d.fail(refused(v))
	}
	var zero T
	return zero
}

// fail keeps err if it is the first refusal (d.err) and returns the empty
// mapping a failed read gives.
func (d *yamlDoc) fail(err error) map[string]any {
	if d.err == nil {
		d.err = err
	}
	return nil
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

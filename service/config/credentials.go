package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
)

// CredentialDir is where systemd puts the files that LoadCredential=
// hands vipproxy.service ($CREDENTIALS_DIRECTORY inside it). They exist
// only for the processes of that unit: its dynamic user cannot read
// root's files, so systemd copies them here at each start.
const CredentialDir = "/run/credentials/vipproxy.service"

// Files says which of the files a config names Load opens.
type Files int

const (
	// AllFiles opens and checks every file the config names: the commands
	// vipproxy.service runs (serve, and check or reload as its
	// ExecStartPre= or ExecReload=) hold its credentials.
	AllFiles Files = iota
	// OutsideService checks a file under CredentialDir as a path only (a
	// credential name there) and opens every other file: any other
	// command (doctor, network, units, keepalived, bird, probe, status,
	// check by hand) runs where those files do not exist.
	OutsideService
)

// FilesFor is the one rule deciding which files a command opens: a
// process that vipproxy.service started has $CREDENTIALS_DIRECTORY set and
// opens every file; any other leaves the credentials to that unit.
func FilesFor(getenv func(string) string) Files {
	if getenv("CREDENTIALS_DIRECTORY") != "" {
		return AllFiles
	}
	return OutsideService
}

// Credential is a key of the config whose file is a credential of
// vipproxy.service.
type Credential struct {
	Key  string // health.cert_file, port[1].health.ca_file, discovery.kubeconfig
	Path string // CredentialDir/Name
}

// Name is the credential's name, the NAME of LoadCredential=NAME:SOURCE.
func (c Credential) Name() string { return filepath.Base(c.Path) }

// IsCredential reports whether path names a file under CredentialDir.
func IsCredential(path string) bool {
	return strings.HasPrefix(path, CredentialDir+"/")
}

// Credentials lists the keys of c that name a file under CredentialDir,
// in the order of the file ([health], the [[port]] tables, [discovery]).
func (c *Config) Credentials() []Credential {
	var out []Credential
	add := func(key, path string) {
		if IsCredential(path) {
			out = append(out, Credential{Key: key, Path: path})
		}
	}
	health := func(key string, h Health) {
		add(key+".ca_file", h.CAFile)
		add(key+".cert_file", h.CertFile)
		add(key+".key_file", h.KeyFile)
		add(key+".token_file", h.TokenFile)
	}
	health("health", c.Health)
	for i, p := range c.Ports {
		if p.Health != c.Health {
			health(fmt.Sprintf("port[%d].health", i), p.Health)
		}
	}
	d := c.Discovery
	add("discovery.kubeconfig", d.Kubeconfig)
	add("discovery.ca_file", d.CAFile)
	add("discovery.cert_file", d.CertFile)
	add("discovery.key_file", d.KeyFile)
	add("discovery.token_file", d.TokenFile)
	return out
}

// CredentialNote is the one line a command outside vipproxy.service
// prints when the config names credentials: what it checked, and who
// opens them. "" when there are none.
func (c *Config) CredentialNote() string {
	creds := c.Credentials()
	if len(creds) == 0 {
		return ""
	}
	keys := make([]string, len(creds))
	for i, cr := range creds {
		keys[i] = cr.Key
	}
	return fmt.Sprintf("note: %s name credentials of vipproxy.service (LoadCredential=): checked as paths under %s/, opened only inside that unit (doctor checks the files LoadCredential= copies)",
		strings.Join(keys, ", "), CredentialDir)
}

// credential reports whether the validator leaves the file at path to
// vipproxy.service, having checked it as a path: it names a credential
// and this command runs outside that unit. A malformed credential path
// is reported at key.
func (v *validator) credential(key, path string) bool {
	if v.files != OutsideService || !IsCredential(path) {
		return false
	}
	if problem := credentialPathProblem(path); problem != "" {
		v.bad(key, "%s %s", path, problem)
	}
	return true
}

// credentialPathProblem says what keeps path from being a file that
// LoadCredential=NAME:SOURCE creates, "" if nothing: systemd puts each
// credential directly in CredentialDir under its NAME, a file name.
func credentialPathProblem(path string) string {
	name := strings.TrimPrefix(path, CredentialDir+"/")
	switch {
	case name == "" || name == "." || name == "..":
		return "names no credential: write " + CredentialDir + "/NAME, NAME as in LoadCredential=NAME:SOURCE"
	case strings.Contains(name, "/"):
		return "is not directly in " + CredentialDir + ": LoadCredential=NAME:SOURCE puts the file at " + CredentialDir + "/NAME"
	case len(name) > 255:
		return "has a credential name longer than 255 bytes (systemd refuses it)"
	case strings.ContainsFunc(name, unicode.IsControl):
		return "has a control character in its credential name"
	}
	return ""
}

// FromSources is the config with each credential path replaced by the
// file systemd copies there (sources maps NAME to SOURCE, as in
// LoadCredential=NAME:SOURCE), validated with every file opened: what
// vipproxy.service will read at its next start. The error names the
// credentials no source is given for, or every rule the sources break.
func (v *Valid) FromSources(sources map[string]string) (*Valid, error) {
	c := v.Config()
	var missing []string
	swap := func(path *string) {
		if !IsCredential(*path) {
			return
		}
		name := filepath.Base(*path)
		src, ok := sources[name]
		if !ok {
			missing = append(missing, name)
			return
		}
		*path = src
	}
	health := func(h *Health) {
		swap(&h.CAFile)
		swap(&h.CertFile)
		swap(&h.KeyFile)
		swap(&h.TokenFile)
	}
	health(&c.Health)
	c.Ports = slices.Clone(c.Ports)
	for i := range c.Ports {
		health(&c.Ports[i].Health)
	}
	for _, p := range []*string{&c.Discovery.Kubeconfig, &c.Discovery.CAFile, &c.Discovery.CertFile, &c.Discovery.KeyFile, &c.Discovery.TokenFile} {
		swap(p)
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("no LoadCredential= of vipproxy.service gives %s", strings.Join(slices.Compact(missing), ", "))
	}
	return ValidateFiles(c, AllFiles)
}

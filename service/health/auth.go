package health

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"
)

// Unverified is the outcome of an https check that passed without
// verifying readiness: the backend refused a check that carries no
// credentials with 401 or 403, as an apiserver started with
// --anonymous-auth=false does (k3s, RKE2, CIS-hardened kubeadm). It has
// answered HTTP over TLS, so it is not wedged, but whether it is ready is
// unknown. It is returned as an error so that a Prober keeps one result;
// Passed counts it as a success.
type Unverified struct {
	Path   string
	Status int
}

func (u *Unverified) Error() string {
	return fmt.Sprintf("readiness unverified: GET %s answered %d %s to a check without credentials (anonymous auth is off)",
		u.Path, u.Status, http.StatusText(u.Status))
}

// Passed reports whether a check result counts as healthy: no error, or
// an Unverified pass.
func Passed(err error) bool { return err == nil || IsUnverified(err) }

// IsUnverified reports whether err is an Unverified pass.
func IsUnverified(err error) bool {
	var u *Unverified
	return errors.As(err, &u)
}

// CredentialsFix tells an operator how to let the check verify
// readiness. Any user the apiserver authenticates may GET /readyz (the
// system:public-info-viewer role), so the node's own kubelet client
// certificate, where each distribution keeps it, is enough: no new
// credential to hand out, none with more rights than a node's.
const CredentialsFix = "give [health] ca_file + cert_file + key_file (or token_file) so that the check verifies /readyz; " +
	"the kubelet's client certificate is enough: " +
	"kubeadm /var/lib/kubelet/pki/kubelet-client-current.pem (cert and key) with /etc/kubernetes/pki/ca.crt; " +
	"k3s /var/lib/rancher/k3s/agent/client-kubelet.crt, client-kubelet.key, server-ca.crt (RKE2: /var/lib/rancher/rke2/agent/...); " +
	"k0s /var/lib/k0s/kubelet/pki/kubelet-client-current.pem with /var/lib/k0s/pki/ca.crt; " +
	"vipproxy.service's dynamic user reads root's files through LoadCredential=NAME:PATH in a drop-in, as /run/credentials/vipproxy.service/NAME"

// UnverifiedFix tells an operator how to end an unverified pass: let
// anonymous clients read the health endpoints and nothing else (no
// credential to hand out), give the check credentials, or accept it.
const UnverifiedFix = "let anonymous clients read /readyz, /livez and /healthz alone (kube-apiserver --authentication-config=examples/authentication-config.yaml, " +
	"without --anonymous-auth: docs/distributions.md#readiness-without-credentials); or " + CredentialsFix +
	"; or accept unverified readiness: [health] accept_unverified = true"

// judge turns the answer's status into the check's result.
func (p *httpsProber) judge(status int) error {
	switch {
	case status == p.expectStatus:
		return nil
	case (status == http.StatusUnauthorized || status == http.StatusForbidden) && !p.credentials:
		return &Unverified{Path: p.path, Status: status}
	case (status == http.StatusUnauthorized || status == http.StatusForbidden) && p.credentials:
		return &Refused{Path: p.path, Status: status}
	}
	return fmt.Errorf("status %d", status)
}

// Refused is a check with credentials that the backend refused: 401 (it
// does not take them) or 403 (it takes them, RBAC says no).
type Refused struct {
	Path   string
	Status int
}

func (r *Refused) Error() string {
	if r.Status == http.StatusForbidden {
		return fmt.Sprintf("status 403 Forbidden: the check's user may not GET %s (RBAC: system:public-info-viewer grants it to every authenticated user)", r.Path)
	}
	return "status 401 Unauthorized: the apiserver refused the check's credentials (health.cert_file/token_file: expired, or not signed by the cluster's client CA?)"
}

// RefusedFix is what to do about a Refused check.
const RefusedFix = "point [health] cert_file/key_file or token_file at a current credential the apiserver takes (openssl x509 -noout -enddate -issuer -in CERT: not expired, issued by the cluster's client CA, i.e. --client-ca-file); " +
	"a 403 means RBAC: keep the system:public-info-viewer binding for system:authenticated"

// authorize adds the bearer token, if the check has one.
func (p *httpsProber) authorize(req *http.Request) {
	if p.token == nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+p.token.get())
}

// token is a bearer-token file read again when it changes (rotation needs
// no reload). A file that cannot be read or is empty (being rewritten)
// keeps the last good token: a local fault is not blamed on the backends,
// and an apiserver that refuses the old token says so with 401.
type token struct {
	file string

	mu    sync.Mutex
	stamp time.Time
	value string
}

func newToken(file string) (*token, error) {
	t := &token{file: file}
	if err := t.reloadLocked(); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *token) get() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	_ = t.reloadLocked() // on error the last good token serves
	return t.value
}

func (t *token) reloadLocked() error {
	fi, err := os.Stat(t.file)
	if err != nil {
		return err
	}
	if t.value != "" && fi.ModTime() == t.stamp {
		return nil
	}
	b, err := os.ReadFile(t.file)
	if err != nil {
		return err
	}
	v := string(bytes.TrimSpace(b))
	if v == "" {
		return fmt.Errorf("%s is empty", t.file)
	}
	t.value, t.stamp = v, fi.ModTime()
	return nil
}

// keyPair is a client certificate read again when its files change, so
// that a rotated certificate (k3s and kubeadm renew theirs) is used
// without a reload. A pair that does not load (caught between writing
// the certificate and the key) keeps the last good one.
type keyPair struct {
	certFile, keyFile string

	mu    sync.Mutex
	stamp [2]time.Time
	cert  *tls.Certificate
}

func newKeyPair(certFile, keyFile string) (*keyPair, error) {
	k := &keyPair{certFile: certFile, keyFile: keyFile}
	if err := k.reload(); err != nil {
		return nil, err
	}
	return k, nil
}

func (k *keyPair) get(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	_ = k.reloadLocked() // on error the last good pair serves
	return k.cert, nil
}

func (k *keyPair) reload() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.reloadLocked()
}

func (k *keyPair) reloadLocked() error {
	var stamp [2]time.Time
	for i, f := range []string{k.certFile, k.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return err
		}
		stamp[i] = fi.ModTime()
	}
	if k.cert != nil && stamp == k.stamp {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		return err
	}
	k.cert, k.stamp = &cert, stamp
	return nil
}

package doctor

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/service/config"
)

// credentialHost is a root holding the shipped vipproxy.service and, with
// dropIn, the shipped kubeadm credentials drop-in and the kubelet's files
// it names, valid for validity.
func credentialHost(t *testing.T, dropIn bool, validity time.Duration) string {
	t.Helper()
	root := t.TempDir()
	copyFile(t, "../../systemd/vipproxy.service", filepath.Join(root, "lib/systemd/system/vipproxy.service"))
	if !dropIn {
		return root
	}
	copyFile(t, "../../examples/credentials/kubeadm.conf", filepath.Join(root, "etc/systemd/system/vipproxy.service.d/credentials.conf"))
	cert, key := selfSigned(t, validity)
	writeFile(t, filepath.Join(root, "etc/kubernetes/pki/ca.crt"), cert)
	writeFile(t, filepath.Join(root, "var/lib/kubelet/pki/kubelet-client-current.pem"), append(cert, key...))
	return root
}

// TestCredentialsFromLoadCredential: doctor checks the files the unit's
// LoadCredential= copies for the shipped node-local example, which names
// kubeadm's credentials under /run/credentials/vipproxy.service/.
func TestCredentialsFromLoadCredential(t *testing.T) {
	cfg, err := config.Load("../../examples/node-local.toml", config.OutsideService)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		dropIn   bool
		validity time.Duration
		status   Status
		detail   string
	}{
		{"drop-in and valid files", true, 365 * 24 * time.Hour, Pass, "ca.crt, kubelet-client.pem from "},
		{"certificate ending soon", true, 10 * 24 * time.Hour, Warn, "discovery.cert_file ("},
		{"certificate expired", true, -time.Hour, Fail, "expired on"},
		{"no drop-in", false, 0, Fail, "no LoadCredential= of vipproxy.service gives ca.crt, kubelet-client.pem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := Host{Root: credentialHost(t, tc.dropIn, tc.validity), Install: &Install{}}
			rs, err := Run(context.Background(), h, cfg, []string{"credentials"})
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 1 || rs[0].Status != tc.status || !strings.Contains(rs[0].Detail, tc.detail) {
				t.Fatalf("credentials check = %+v, want %s with %q", rs, tc.status, tc.detail)
			}
		})
	}
}

// TestCredentialsKeyMismatch: a key that is not the certificate's fails,
// as config's own rule says.
func TestCredentialsKeyMismatch(t *testing.T) {
	cfg, err := config.Load("../../examples/node-local.toml", config.OutsideService)
	if err != nil {
		t.Fatal(err)
	}
	root := credentialHost(t, true, 365*24*time.Hour)
	cert, _ := selfSigned(t, time.Hour)
	_, otherKey := selfSigned(t, time.Hour)
	writeFile(t, filepath.Join(root, "var/lib/kubelet/pki/kubelet-client-current.pem"), append(cert, otherKey...))
	r := checkCredentials(context.Background(), Host{Root: root, Install: &Install{}}, cfg)
	if r.Status != Fail || !strings.Contains(r.Detail, "discovery.cert_file") {
		t.Fatalf("credentials check with a mismatched key = %+v, want FAIL at discovery.cert_file", r)
	}
}

// selfSigned is a certificate and its key (PEM) valid from an hour ago
// for validity.
func selfSigned(t *testing.T, validity time.Duration) (cert, key []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Add(-time.Hour)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "system:node:test"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour + validity), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, data)
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

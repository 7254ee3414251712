// Package testpki writes a throwaway PKI for tests, the demo and the VM
// tests: a CA, a server certificate for the apiserver stand-ins and a
// client certificate, all ECDSA P-256, like a small kubeadm cluster.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/vipproxy/vipproxy/service/atomicfile"
)

// Files are the paths Write created, all PEM.
type Files struct {
	CA, CAKey             string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
}

// validity of every certificate: long enough for a VM test run, short
// enough that nobody mistakes these for real credentials.
const validity = 7 * 24 * time.Hour

// defaultHosts are always in the server certificate.
var defaultHosts = []string{"127.0.0.1", "::1", "localhost"}

// Load names the files Write wrote into dir (it reads nothing).
func Load(dir string) *Files {
	return &Files{
		CA: filepath.Join(dir, "ca.pem"), CAKey: filepath.Join(dir, "ca-key.pem"),
		ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
	}
}

// Write creates dir and writes ca.pem, ca-key.pem, server.pem,
// server-key.pem, client.pem and client-key.pem. The server certificate
// is valid for serverHosts (IPs or DNS names) plus 127.0.0.1, ::1 and
// localhost; the client certificate has CN "vipproxy-test-client".
func Write(dir string, serverHosts []string) (*Files, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create pki dir: %w", err)
	}
	f := Load(dir)
	now := time.Now().Add(-time.Hour) // tolerate clock skew between VMs
	caKey, caDER, err := newCert(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "vipproxy-test-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil, nil)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parse ca: %w", err)
	}
	server := leaf("vipproxy-test-server", now, x509.ExtKeyUsageServerAuth)
	for _, h := range append(append([]string(nil), serverHosts...), defaultHosts...) {
		if ip := net.ParseIP(h); ip != nil {
			server.IPAddresses = append(server.IPAddresses, ip)
		} else if h != "" {
			server.DNSNames = append(server.DNSNames, h)
		}
	}
	serverKey, serverDER, err := newCert(server, ca, caKey)
	if err != nil {
		return nil, err
	}
	clientKey, clientDER, err := newCert(leaf("vipproxy-test-client", now, x509.ExtKeyUsageClientAuth), ca, caKey)
	if err != nil {
		return nil, err
	}
	for _, w := range []struct {
		path string
		der  []byte
		key  *ecdsa.PrivateKey
		keyP string
	}{{f.CA, caDER, caKey, f.CAKey}, {f.ServerCert, serverDER, serverKey, f.ServerKey}, {f.ClientCert, clientDER, clientKey, f.ClientKey}} {
		if err := writePEM(w.path, "CERTIFICATE", w.der, 0o644); err != nil {
			return nil, err
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(w.key)
		if err != nil {
			return nil, fmt.Errorf("marshal key: %w", err)
		}
		if err := writePEM(w.keyP, "PRIVATE KEY", keyDER, 0o600); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func leaf(cn string, now time.Time, usage x509.ExtKeyUsage) *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		NotBefore:   now,
		NotAfter:    now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
}

// newCert makes a key and a certificate from tmpl signed by parent
// (self-signed when parent is nil).
func newCert(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("serial: %w", err)
	}
	tmpl.SerialNumber = serial
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("sign %s: %w", tmpl.Subject.CommonName, err)
	}
	return key, der, nil
}

// writePEM writes atomically (temp file + rename) so a reader never sees
// half a key.
func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	if err := atomicfile.Write(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ServerTLS is a server config presenting the server certificate and
// requiring a client certificate signed by the CA (mTLS).
func (f *Files) ServerTLS() (*tls.Config, error) {
	cert, pool, err := f.load("server", f.ServerCert, f.ServerKey)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// ClientTLS is a client config presenting the client certificate and
// verifying the server against the CA.
func (f *Files) ClientTLS() (*tls.Config, error) {
	cert, pool, err := f.load("client", f.ClientCert, f.ClientKey)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// load reads one side's certificate and key (who: "server" or "client")
// and the CA that verifies the other side.
func (f *Files) load(who, certFile, keyFile string) (tls.Certificate, *x509.CertPool, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("load %s certificate: %w", who, err)
	}
	pool, err := loadPool(f.CA)
	return cert, pool, err
}

// loadPool reads a PEM CA bundle.
func loadPool(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

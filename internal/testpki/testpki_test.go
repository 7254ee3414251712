package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"io"
	"os"
	"testing"
)

func TestWriteChainsAndHosts(t *testing.T) {
	dir := t.TempDir()
	f, err := Write(dir, []string{"10.0.0.10", "cp.example.org"})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := loadPool(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	server, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(server.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Errorf("server key is %T; want ECDSA P-256", leaf.PublicKey)
	}
	for _, host := range []string{"10.0.0.10", "cp.example.org", "127.0.0.1", "::1", "localhost"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err != nil {
			t.Errorf("server certificate for %s: %v", host, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "10.0.0.11"}); err == nil {
		t.Error("server certificate verifies for a host it was not issued for")
	}
	if st, err := os.Stat(f.ClientKey); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("client key mode %v, %v; want 0600", st.Mode(), err)
	}
}

// TestMutualTLSHandshake: the server config requires and accepts the
// client certificate over a real loopback connection.
func TestMutualTLSHandshake(t *testing.T) {
	f, err := Write(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	serverConf, err := f.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	clientConf, err := f.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", serverConf)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	gotCN := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			gotCN <- err.Error()
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		if err := tc.Handshake(); err != nil {
			gotCN <- err.Error()
			return
		}
		gotCN <- tc.ConnectionState().PeerCertificates[0].Subject.CommonName
		io.WriteString(c, "hi")
	}()
	conn, err := tls.Dial("tcp", ln.Addr().String(), clientConf)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.ReadAll(conn); err != nil {
		t.Fatal(err)
	}
	if cn := <-gotCN; cn != "vipproxy-test-client" {
		t.Fatalf("server saw client %q", cn)
	}
}

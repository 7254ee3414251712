// Package pkitest gives a test a throwaway PKI (testpki) in one call, or
// fails the test. It is apart from testpki, which the demo binary links,
// so that only tests import package testing.
package pkitest

import (
	"crypto/tls"
	"testing"

	"github.com/vipproxy/vipproxy/internal/testpki"
)

// New writes a CA, a server certificate (for 127.0.0.1, ::1, localhost and
// hosts) and a client certificate into a directory removed when the test
// ends.
func New(t testing.TB, hosts ...string) *testpki.Files {
	t.Helper()
	f, err := testpki.Write(t.TempDir(), hosts)
	if err != nil {
		t.Fatalf("write a test PKI: %v", err)
	}
	return f
}

// TLS is f's mutual-TLS pair: the server's config (client certificate
// required) and the client's.
func TLS(t testing.TB, f *testpki.Files) (server, client *tls.Config) {
	t.Helper()
	server, err := f.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	if client, err = f.ClientTLS(); err != nil {
		t.Fatal(err)
	}
	return server, client
}

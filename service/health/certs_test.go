package health

import (
	"testing"

	"github.com/vipproxy/vipproxy/internal/testpki"
	"github.com/vipproxy/vipproxy/internal/testpki/pkitest"
)

// newTestPKI writes a throwaway CA, a server certificate for 127.0.0.1
// and apiserver.test, and a client certificate.
func newTestPKI(t testing.TB) *testpki.Files {
	t.Helper()
	return pkitest.New(t, "apiserver.test")
}

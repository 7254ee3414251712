package health

import (
	"testing"

	"github.com/vipproxy/vipproxy/internal/testpki"
)

// newTestPKI writes a throwaway CA, a server certificate for 127.0.0.1
// and apiserver.test, and a client certificate.
func newTestPKI(t testing.TB) *testpki.Files {
	t.Helper()
	files, err := testpki.Write(t.TempDir(), []string{"apiserver.test"})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

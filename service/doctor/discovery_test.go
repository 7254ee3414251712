package doctor

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/standin"
	"github.com/vipproxy/vipproxy/internal/testpki/pkitest"
	"github.com/vipproxy/vipproxy/service/config"
)

// The discovery check lists the EndpointSlices through the backends with
// discovery's credentials: it passes with good ones, fails with the fix
// when the apiserver refuses them, and is skipped when discovery is off.
func TestCheckDiscovery(t *testing.T) {
	pki := pkitest.New(t)
	tlsConf, _ := pkitest.TLS(t, pki)
	slices := standin.NewEndpointSlices()
	srv, err := standin.New(standin.Options{Name: "api", Listen: "127.0.0.2:0", TLS: tlsConf, Slices: slices, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	slices.SetAddrs(netip.MustParseAddrPort(srv.Addr()))
	run := func(discoveryTOML string) Result {
		t.Helper()
		cfg, err := config.Parse("test.toml", []byte(fmt.Sprintf("vip.addresses = [\"127.0.0.1\"]\n[[backend]]\naddress = %q\n%s", srv.Addr(), discoveryTOML)))
		if err != nil {
			t.Fatal(err)
		}
		return checkDiscovery(context.Background(), Host{DialTimeout: 2 * time.Second}, cfg)
	}
	good := fmt.Sprintf("[discovery]\nenable = true\nca_file = %q\ncert_file = %q\nkey_file = %q\nserver_name = \"localhost\"\n", pki.CA, pki.ClientCert, pki.ClientKey)
	if r := run(good); r.Status != Pass || !strings.Contains(r.Detail, "lists 1 ready") {
		t.Errorf("good credentials: %+v", r)
	}
	// A token alone: this stand-in wants a client certificate.
	token := fmt.Sprintf("[discovery]\nenable = true\nca_file = %q\ntoken_file = %q\nserver_name = \"localhost\"\n", pki.CA, pki.CA)
	if r := run(token); r.Status != Fail || r.Fix == "" {
		t.Errorf("refused credentials: %+v", r)
	}
	if r := run(""); r.Status != Skip {
		t.Errorf("discovery off: %+v", r)
	}
}

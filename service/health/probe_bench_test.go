package health

import (
	"context"
	"net/http"
	"testing"

	"github.com/vipproxy/vipproxy/service/config"
)

// BenchmarkProbe measures one check of each kind against a local mTLS
// server: the cost of a check is what a short interval multiplies.
func BenchmarkProbe(b *testing.B) {
	pki := newTestPKI(b)
	addr := tlsServer(b, pki, http.StatusOK)
	for _, kind := range config.CheckKinds {
		b.Run(kind.String(), func(b *testing.B) {
			cfg := healthConfig(kind)
			cfg.CAFile, cfg.CertFile, cfg.KeyFile = pki.CA, pki.ClientCert, pki.ClientKey
			p, err := NewProber(cfg)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := p.Probe(context.Background(), addr); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

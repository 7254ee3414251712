package doctor

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/vipproxy/vipproxy/service/config"
)

// credentialExpiry is how long before its end a credential's certificate
// is reported: the copy vipproxy.service holds is made at its start, so a
// certificate the kubelet rotates later reaches it only at a restart.
const credentialExpiry = 30 * 24 * time.Hour

// credentialsFix is what to do when vipproxy.service lacks a credential.
func (in Install) credentialsFix() string {
	if in.NixOS {
		return "name each file in services.vipproxy.discoveryCredentials or systemd.services.vipproxy.serviceConfig.LoadCredential (NAME:SOURCE), then nixos-rebuild switch"
	}
	return "`vipproxy units write` writes " + "/etc/systemd/system/vipproxy.service.d/credentials.conf (examples/credentials/: LoadCredential=NAME:SOURCE), then systemctl daemon-reload && systemctl restart vipproxy"
}

// checkCredentials: each credential the config names comes from a
// LoadCredential= of vipproxy.service whose source root reads, the files
// pass the config's own rules (a CA with a certificate, a certificate and
// key that match), and no certificate ends within credentialExpiry.
func checkCredentials(ctx context.Context, h Host, cfg *config.Valid) Result {
	creds := cfg.Credentials()
	if len(creds) == 0 {
		return skip("the config names no credential of vipproxy.service (%s)", config.CredentialDir)
	}
	sources, from, err := serviceCredentials(ctx, h)
	if err != nil {
		return fail(h.Install.credentialsFix(), "cannot read vipproxy.service's LoadCredential=: %v", err)
	}
	if _, err := cfg.FromSources(sources); err != nil {
		return fail(h.Install.credentialsFix(), "the files vipproxy.service would get (LoadCredential= of %s): %v", from, err)
	}
	var names []string
	for _, c := range creds {
		if !slices.Contains(names, c.Name()) {
			names = append(names, c.Name())
		}
	}
	var soon []string
	for _, c := range creds {
		if !strings.HasSuffix(c.Key, "cert_file") {
			continue
		}
		end, err := certificateEnd(sources[c.Name()])
		switch {
		case err != nil:
			return fail(h.Install.credentialsFix(), "%s (%s): %v", c.Key, sources[c.Name()], err)
		case time.Until(end) <= 0:
			return fail("renew it (the kubelet rotates its own; a stopped kubelet does not), then systemctl restart vipproxy", "%s (%s) expired on %s", c.Key, sources[c.Name()], end.UTC().Format(time.DateOnly))
		case time.Until(end) < credentialExpiry:
			soon = append(soon, fmt.Sprintf("%s (%s) ends on %s", c.Key, sources[c.Name()], end.UTC().Format(time.DateOnly)))
		}
	}
	if len(soon) > 0 {
		return warn("after the kubelet renews it, systemctl restart vipproxy (the unit's copy is made at its start)", "%s: within %d days", strings.Join(soon, "; "), int(credentialExpiry.Hours()/24))
	}
	return pass("%s from %s: readable, valid, no certificate ending within %d days", strings.Join(names, ", "), from, int(credentialExpiry.Hours()/24))
}

// certificateEnd is the NotAfter of the first certificate in the file.
func certificateEnd(path string) (time.Time, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, err
	}
	for len(data) > 0 {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type == "CERTIFICATE" {
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return time.Time{}, fmt.Errorf("parse the certificate: %w", err)
			}
			return cert.NotAfter, nil
		}
	}
	return time.Time{}, fmt.Errorf("no PEM certificate in %s", path)
}

// withSources is cfg as vipproxy.service reads it: each credential path
// replaced by the file LoadCredential= copies there, so that the checks
// that open them (backends, discovery) run here, outside the unit. cfg
// itself when it names no credential or they cannot be resolved (the
// credentials check says why).
func withSources(ctx context.Context, h Host, cfg *config.Valid) *config.Valid {
	if len(cfg.Credentials()) == 0 {
		return cfg
	}
	sources, _, err := serviceCredentials(ctx, h)
	if err != nil {
		return cfg
	}
	if sourced, err := cfg.FromSources(sources); err == nil {
		return sourced
	}
	return cfg
}

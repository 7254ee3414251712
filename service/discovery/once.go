package discovery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"time"
)

// ListOnce lists the kubernetes EndpointSlices once through the first seed
// that answers, for `vipproxy doctor`: the ready endpoints, the address that
// answered, or the error with the fix it calls for.
func ListOnce(ctx context.Context, creds Credentials, seeds []string, timeout time.Duration) ([]netip.AddrPort, string, error) {
	c := client{creds: creds, timeout: timeout, maxBody: DefaultMaxBody, maxEvent: DefaultMaxEvent}
	var errs []error
	for _, addr := range seeds {
		v, _, err := c.list(ctx, addr)
		if err == nil {
			return v.union(), addr, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
	}
	if len(errs) == 0 {
		return nil, "", errors.New("no backend to ask")
	}
	return nil, "", errors.Join(errs...)
}

// Fix says what to do about an error of ListOnce.
func Fix(err error) string {
	var ae *apiError
	switch {
	case errors.As(err, &ae) && ae.Code == http.StatusForbidden:
		return "grant get/list/watch on the endpointslice kubernetes in default: kubectl apply -f examples/rbac-discovery.yaml (and name this node's user in it)"
	case errors.As(err, &ae) && ae.Code == http.StatusUnauthorized:
		return "the apiservers refuse the credentials: check discovery.cert_file/key_file or token_file (or the kubeconfig's user), and that they are not expired"
	default:
		return "check discovery's credentials (vipproxy check) and that the backends answer (doctor's backends check)"
	}
}

package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// Validate checks the whole config and fills derived defaults (backend
// names, the keepalived interface). The first problem found is returned.
func (c *Config) Validate() error {
	bad := func(key, format string, args ...any) error {
		return &Error{File: c.Path, Key: key, Reason: fmt.Sprintf(format, args...)}
	}
	if len(c.VIP.Addresses) == 0 {
		return bad("vip.addresses", "at least one VIP address is required")
	}
	if c.VIP.Port == 0 {
		return bad("vip.port", "must be between 1 and 65535")
	}
	if len(c.Backends) == 0 {
		return bad("backend", "at least one [[backend]] is required")
	}
	for i := range c.Backends {
		b := &c.Backends[i]
		key := fmt.Sprintf("backend[%d].address", i)
		host, port, err := net.SplitHostPort(b.Address)
		if err != nil {
			return bad(key, "%q is not host:port: %v", b.Address, err)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return bad(key, "%q has no valid port", b.Address)
		}
		if ip, err := netip.ParseAddr(host); err == nil && uint16(mustAtoi(port)) == c.VIP.Port {
			for _, vip := range c.VIP.Addresses {
				if ip == vip {
					return bad(key, "%q is the VIP listener itself: the proxy would loop", b.Address)
				}
			}
		}
		if b.Name == "" {
			b.Name = b.Address
		}
	}
	switch c.Balance.Algorithm {
	case RoundRobin, LeastConnections, RandomTwoChoices:
	default:
		return bad("balance.algorithm", "%q is not one of %s, %s, %s", c.Balance.Algorithm, RoundRobin, LeastConnections, RandomTwoChoices)
	}
	switch c.Health.Type {
	case CheckTCP, CheckTLS, CheckHTTPS:
	default:
		return bad("health.type", "%q is not one of tcp, tls, https", c.Health.Type)
	}
	if c.Keepalived.Interface == "" && len(c.Network.Uplinks) > 0 {
		c.Keepalived.Interface = c.Network.Uplinks[0]
	}
	return nil
}

func mustAtoi(s string) int { n, _ := strconv.Atoi(s); return n }

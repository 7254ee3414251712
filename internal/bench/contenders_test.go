package bench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vipproxy/vipproxy/service/config"
)

// TestVipproxyConfigIsValid: the config the bench gives vipproxy loads,
// and caps connections as HAProxy's maxconn does (the idle figure holds
// 9,900, more than the daemon would derive from 20,000 descriptors).
func TestVipproxyConfigIsValid(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vipproxy.toml")
	if err := os.WriteFile(path, []byte(vipproxyConfig(16443, 16444, []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"})), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, config.AllFiles)
	if err != nil {
		t.Fatalf("the bench's vipproxy config: %v", err)
	}
	if cfg.Limits.MaxConnections != maxConns {
		t.Errorf("limits.max_connections = %d, want %d", cfg.Limits.MaxConnections, maxConns)
	}
}

package portowner

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0100007F:1F90":                         "127.0.0.1:8080",
		"00000000:192B":                         "0.0.0.0:6443",
		"00000000000000000000000000000000:192B": "[::]:6443",
		"00000000000000000000000001000000:0050": "[::1]:80",
	} {
		got, err := parseAddr(in)
		if err != nil || got.String() != want {
			t.Errorf("parseAddr(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0100007F", "0100007F:XYZ", "01007F:0050", "zz00007F:0050"} {
		if _, err := parseAddr(bad); err == nil {
			t.Errorf("parseAddr(%q) accepted", bad)
		}
	}
}

// A real wildcard listener of this test process is found, with its pid,
// command and the fix, as the daemon and doctor report it.
func TestListenersFindsThisProcess(t *testing.T) {
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	ls, err := Listeners("/proc", port)
	if err != nil || len(ls) != 1 {
		t.Fatalf("Listeners = %v, %v; want this process's socket", ls, err)
	}
	comm, _ := os.ReadFile("/proc/self/comm")
	l := ls[0]
	if !l.Wildcard() || l.PID != os.Getpid() || l.Command != strings.TrimSpace(string(comm)) {
		t.Errorf("listener %+v; want *:%d held by pid %d", l, port, os.Getpid())
	}
	vip := netip.MustParseAddr("192.0.2.10")
	msg := Explain("/proc", []netip.Addr{vip}, port, false)
	if !strings.Contains(msg, "is held by *:") || !strings.Contains(msg, "pid ") || !strings.Contains(msg, "fix: make that program listen on its own address") {
		t.Errorf("Explain = %q", msg)
	}
	// With vip.reuse_port the bind failed all the same: the holder does
	// not share the port.
	if msg := Explain("/proc", []netip.Addr{vip}, port, true); !strings.Contains(msg, "fix: "+ShareFix) {
		t.Errorf("Explain, shared = %q", msg)
	}
	if c := Conflicts(ls, []netip.Addr{netip.MustParseAddr("2001:db8::10")}); len(c) != 0 {
		t.Errorf("an IPv4 wildcard conflicts with an IPv6-only VIP: %v", c)
	}
}

func TestApiserverFix(t *testing.T) {
	l := Listener{Addr: netip.MustParseAddrPort("[::]:6443"), PID: 812, Command: "kube-apiserver", Unit: "kubelet.service"}
	if got := l.String(); got != "[::]:6443 (kube-apiserver, pid 812, unit kubelet.service)" {
		t.Errorf("String = %q", got)
	}
	// RKE2's --bind-address moves its supervisor, never its apiserver.
	if fix := Fix(l); !strings.Contains(fix, "k3s: --bind-address") || !strings.Contains(fix, "RKE2, whose kube-apiserver always binds every address: kube-apiserver-arg: [permit-port-sharing=true]") {
		t.Errorf("Fix = %q", fix)
	}
	own := Listener{Addr: netip.MustParseAddrPort("192.0.2.10:6443"), PID: 1, Command: "systemd"}
	if c := Conflicts([]Listener{own}, []netip.Addr{netip.MustParseAddr("192.0.2.10")}); len(c) != 0 {
		t.Errorf("vipproxy.socket's own listener counted as a conflict")
	}
}

func TestNoTCP6Table(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "net"), 0o755)
	os.WriteFile(filepath.Join(root, "net/tcp"), []byte("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 00000000:192B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1\n"), 0o644)
	ls, err := Listeners(root, 6443)
	if err != nil || len(ls) != 1 || ls[0].Inode != 4242 || ls[0].PID != 0 {
		t.Fatalf("Listeners = %+v, %v", ls, err)
	}
	if !strings.Contains(ls[0].String(), "not visible") {
		t.Errorf("String = %q", ls[0].String())
	}
}

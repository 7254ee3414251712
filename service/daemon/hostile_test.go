package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/standin"
	"github.com/vipproxy/vipproxy/internal/testutil"
)

// Discovery that a hostile, huge or broken cluster answer
// cannot hurt, shown against the built binary.

// mkfifo makes a FIFO that nobody writes: a plain open(2) of it blocks.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

// runBinary runs vipproxy with args for at most 10 s and returns its exit
// code and output; a run that had to be killed fails the test.
func runBinary(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "vipproxy"), args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("vipproxy %s still running after 10 s (blocked?):\n%s", strings.Join(args, " "), out)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// kubeconfig writes a kubeconfig for the test PKI with the given client
// certificate file.
func kubeconfig(t *testing.T, dir, certFile string) string {
	t.Helper()
	path := filepath.Join(dir, "kubeconfig")
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority: %s
    server: https://127.0.0.1:6443
  name: test
contexts:
- context:
    cluster: test
    user: vipproxy
  name: test
current-context: test
users:
- name: vipproxy
  user:
    client-certificate: %s
    client-key: %s
`, pki.CA, certFile, pki.ClientKey)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A FIFO wherever discovery reads a file (the state file, the kubeconfig,
// a certificate it names, the token) is refused by `vipproxy check` and by
// `vipproxy serve` at start, at once and by name. Before, check passed
// and serve blocked in open(2) for ever, never listening.
func TestFIFOsAreRefusedAtCheckAndStart(t *testing.T) {
	cases := map[string]func(dir string) string{
		"state file": func(dir string) string {
			mkfifo(t, filepath.Join(dir, "discovered.json"))
			return fmt.Sprintf("kubeconfig = %q\nstate_dir = %q\n", kubeconfig(t, dir, pki.ClientCert), dir)
		},
		"kubeconfig": func(dir string) string {
			mkfifo(t, filepath.Join(dir, "kubeconfig"))
			return fmt.Sprintf("kubeconfig = %q\n", filepath.Join(dir, "kubeconfig"))
		},
		"kubeconfig's client-certificate": func(dir string) string {
			mkfifo(t, filepath.Join(dir, "cert.pem"))
			return fmt.Sprintf("kubeconfig = %q\n", kubeconfig(t, dir, filepath.Join(dir, "cert.pem")))
		},
		"token_file": func(dir string) string {
			mkfifo(t, filepath.Join(dir, "token"))
			return fmt.Sprintf("ca_file = %q\ntoken_file = %q\n", pki.CA, filepath.Join(dir, "token"))
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := newSettings(t, "127.0.0.2:1")
			s.Extra = "\n[discovery]\nenable = true\n" + setup(dir)
			cfg := filepath.Join(dir, "vipproxy.toml")
			if err := os.WriteFile(cfg, []byte(s.toml()), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, cmd := range []string{"check", "serve"} {
				code, out := runBinary(t, nil, cmd, "--config", cfg)
				if code == 0 || !strings.Contains(out, "not a regular file (a FIFO)") {
					t.Errorf("vipproxy %s: exit %d, want a refusal naming the FIFO:\n%s", cmd, code, out)
				}
			}
		})
	}
}

// A FIFO the config does not name ($STATE_DIRECTORY's state file, a
// certificate swapped for a FIFO after the start) neither blocks the start
// nor the stop: the daemon serves, says what it refused, and SIGTERM ends
// it (the drain timeout is 5 s).
func TestSIGTERMEndsTheDaemonWhateverDiscoveryReads(t *testing.T) {
	c := newCluster(t)
	stateDir, certDir := t.TempDir(), t.TempDir()
	mkfifo(t, filepath.Join(stateDir, "discovered.json"))
	cert := filepath.Join(certDir, "client.pem")
	testutil.CopyFile(t, pki.ClientCert, cert, 0o600)
	s := newSettings(t, c.servers[0].Addr())
	s.Extra = fmt.Sprintf("\n[discovery]\nenable = true\nallow_loopback = true\nca_file = %q\ncert_file = %q\nkey_file = %q\nserver_name = \"localhost\"\nresync = \"2s\"\n",
		pki.CA, cert, pki.ClientKey)
	p := startVIPProxy(t, s, []string{"STATE_DIRECTORY=" + stateDir})
	p.waitFor(func() bool { return strings.Contains(p.log.String(), "not a regular file (a FIFO)") }, "the state-file FIFO named in the log")
	p.waitSources(map[string]string{c.servers[0].Addr(): "static", c.servers[1].Addr(): "discovered", c.servers[2].Addr(): "discovered"})

	os.Remove(cert)
	mkfifo(t, cert)
	p.waitFor(func() bool { return strings.Contains(p.log.String(), cert+" is not a regular file") }, "the certificate FIFO named in the log")
	start := time.Now()
	p.signal(syscall.SIGTERM)
	p.waitExit("SIGTERM")
	// A read blocked on a FIFO never ends: a bound far above the drain
	// timeout (5 s) still catches it, and no load reaches it.
	if took := time.Since(start); took > testutil.Scaled(30*time.Second) {
		t.Errorf("SIGTERM took %s to end the daemon; the drain timeout is 5 s", took.Round(time.Millisecond))
	}
}

// A cluster that lists 16 new endpoints every 100 ms never gives the
// daemon more than max_backends discovered backends, draining ones
// included, at any moment (sampled every 50 ms for 4 s). Before, the
// members that drained for their grace piled up: 5,362 backends after 70 s.
func TestChurnNeverExceedsMaxBackends(t *testing.T) {
	slices := standin.NewEndpointSlices()
	seed := backend(t, "seed", func(o *standin.Options) { o.Slices = slices })
	s := newSettings(t, seed.Addr())
	s.Extra = fmt.Sprintf("\n[discovery]\nenable = true\nallow_loopback = true\nca_file = %q\ncert_file = %q\nkey_file = %q\nserver_name = \"localhost\"\ngrace = \"1h\"\nmax_backends = 16\n",
		pki.CA, pki.ClientCert, pki.ClientKey)
	p := startVIPProxy(t, s, nil)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for round := 0; round < 1000; round++ {
			eps := make([]netip.AddrPort, 16)
			for i := range eps {
				// Loopback only: the daemon health-checks what it accepts.
				eps[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 2, byte(round), byte(i + 1)}), 6443)
			}
			slices.SetAddrs(eps...)
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	defer func() { close(done); <-stopped }()
	most := 0
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		most = max(most, len(p.status().Backends))
	}
	if most > 17 {
		t.Errorf("up to %d backends during the churn, want at most max_backends 16 + 1 static", most)
	}
	if m, _ := p.get("/metrics"); len(m) > 512<<10 {
		t.Errorf("/metrics is %d bytes after the churn", len(m))
	}
	t.Logf("at most %d backends during 4 s of churn (16 new endpoints every 100 ms)", most)
}

// hugeSliceAPI is a list/watch stand-in whose one kubernetes slice holds
// 100,000 addresses (1.4 MB, as an attacker packs them: many addresses
// in one endpoint) and whose watch sends a bookmark every 2 ms. The
// endpoints are loopback addresses: the daemon health-checks the ones it
// keeps.
func hugeSliceAPI(t *testing.T) *httptest.Server {
	var b strings.Builder
	b.WriteString(`{"kind":"EndpointSliceList","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"kubernetes","resourceVersion":"7","labels":{"kubernetes.io/service-name":"kubernetes"}},"addressType":"IPv4","ports":[{"name":"https","port":6443,"protocol":"TCP"}],"endpoints":[{"conditions":{"ready":true},"addresses":[`)
	for i := range 100_000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"127.4.%d.%d"`, i>>8&255, i&255+i>>16)
	}
	b.WriteString(`]}]}]}`)
	list := b.String()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "" {
			w.Write([]byte(list))
			return
		}
		flusher := w.(http.Flusher)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for range 30_000 {
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
			}
			if _, err := w.Write([]byte(`{"type":"BOOKMARK","object":{"kind":"EndpointSlice","metadata":{"resourceVersion":"7"}}}` + "\n")); err != nil {
				return
			}
			flusher.Flush()
		}
	}))
	conf, err := pki.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = conf
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the tcp checks' bare connects
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// cpuTicks is a process's user+system CPU time in clock ticks.
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return utime + stime
}

// Bookmarks on a watch of a 100,000-endpoint slice cost the daemon under
// 10 ms of CPU each (it measures about 0.1 ms: the answer did not change,
// nothing is merged). Before, every event cost 3.7 s: a quadratic union
// and a merge per event.
func TestBookmarksOnAHugeSliceAreCheap(t *testing.T) {
	api := hugeSliceAPI(t)
	s := newSettings(t, api.Listener.Addr().String())
	s.Extra = fmt.Sprintf("\n[discovery]\nenable = true\nallow_loopback = true\nca_file = %q\ncert_file = %q\nkey_file = %q\nserver_name = \"localhost\"\nmax_backends = 16\n",
		pki.CA, pki.ClientCert, pki.ClientKey)
	p := startVIPProxy(t, s, nil)
	events := func() uint64 {
		var st struct {
			Discovery struct {
				Events uint64 `json:"events"`
			} `json:"discovery"`
		}
		body, _ := p.get("/status")
		json.Unmarshal([]byte(body), &st)
		return st.Discovery.Events
	}
	p.waitFor(func() bool { return events() > 10 }, "bookmarks read")
	pid := p.cmd.Process.Pid
	e0, c0 := events(), cpuTicks(t, pid)
	time.Sleep(3 * time.Second)
	e1, c1 := events(), cpuTicks(t, pid)
	n := e1 - e0
	if n == 0 {
		t.Fatalf("no bookmark read in 3 s (%d ticks of CPU)", c1-c0)
	}
	// Clock ticks are 10 ms (USER_HZ 100).
	perBookmark := time.Duration(c1-c0) * 10 * time.Millisecond / time.Duration(n)
	if perBookmark > 10*time.Millisecond {
		t.Errorf("%s of CPU per bookmark (%d bookmarks, %d ticks)", perBookmark, n, c1-c0)
	}
	t.Logf("%d bookmarks in 3 s: %d clock ticks of CPU, %s each", n, c1-c0, perBookmark)
}

// Endpoints the node must not dial are refused before any check: the
// NAT64 and 6to4 forms of the metadata address, the admin endpoint's own
// address. Before, all were accepted and health-checked (the NAT64 one
// dialled for 40 s). (Loopback is allowed here for the stand-ins; its
// refusal without allow_loopback is TestRefuse's.)
func TestForbiddenEndpointsAreNeverDialled(t *testing.T) {
	slices := standin.NewEndpointSlices()
	seed := backend(t, "seed", func(o *standin.Options) { o.Slices = slices })
	s := newSettings(t, seed.Addr())
	s.Admin = fmt.Sprintf("127.0.0.5:%d", testutil.FreePort(t))
	s.Extra = fmt.Sprintf("\n[discovery]\nenable = true\nallow_loopback = true\nca_file = %q\ncert_file = %q\nkey_file = %q\nserver_name = \"localhost\"\n",
		pki.CA, pki.ClientCert, pki.ClientKey)
	p := startVIPProxy(t, s, nil)
	// One port per answer: the apiservers' slice has one.
	slices.SetAddrs(netip.MustParseAddrPort("[64:ff9b::a9fe:a9fe]:80"), netip.MustParseAddrPort("[2002:a9fe:a9fe::1]:80"))
	p.waitFor(func() bool { return strings.Contains(p.log.String(), "discovered backends refused: 2") }, "the NAT64 and 6to4 forms refused")
	slices.SetAddrs(netip.MustParseAddrPort(s.Admin))
	p.waitFor(func() bool { return strings.Contains(p.log.String(), "one of vipproxy's own listeners") }, "the admin endpoint refused")
	if got := p.status().Backends; len(got) != 1 {
		t.Errorf("backends %+v, want the static seed alone", got)
	}
	if m, _ := p.get("/metrics"); strings.Contains(m, "64:ff9b") || strings.Contains(m, "2002:") || strings.Contains(m, `backend="`+s.Admin) {
		t.Errorf("a refused endpoint has metrics (it was checked)")
	}
}

package listen

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/service/config"
)

// TestFreeBindNonLocal binds an address this host does not have (TEST-NET-1,
// nothing is sent to it): a plain bind fails, IP_FREEBIND succeeds.
func TestFreeBindNonLocal(t *testing.T) {
	addr := netip.MustParseAddrPort("192.0.2.57:16443")
	if ln, err := net.Listen("tcp4", addr.String()); err == nil {
		ln.Close()
		t.Skip("192.0.2.57 is configured on this host; cannot show the difference")
	}
	ln, err := freeBind(context.Background(), addr, false)
	if err != nil {
		t.Fatalf("freeBind(%s): %v", addr, err)
	}
	defer ln.Close()
	if got := ln.Addr().String(); got != addr.String() {
		t.Errorf("listening on %s, want %s", got, addr)
	}
}

func TestFreeBindServesLoopback(t *testing.T) {
	ln, err := freeBind(context.Background(), netip.MustParseAddrPort("127.0.0.1:0"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Write([]byte("hi"))
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 2)
	if _, err := c.Read(buf); err != nil || string(buf) != "hi" {
		t.Errorf("read %q, %v", buf, err)
	}
}

func TestActivationWithoutVIPPortIsAnError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ports := []config.Port{{Name: "api", Port: 1}}
	_, err = fromActivation(context.Background(), map[string][]net.Listener{"vipproxy.socket": {ln}}, config.VIP{}, ports)
	if err == nil || !strings.Contains(err.Error(), "none on a VIP port") || !strings.Contains(err.Error(), "FileDescriptorName=vip") {
		t.Fatalf("error = %v, want one naming the missing VIP socket and the fix", err)
	}
	if _, aerr := ln.Accept(); !errors.Is(aerr, net.ErrClosed) {
		t.Errorf("unused activated listener left open")
	}
}

// TestActivationSortsByBoundPort: passed sockets go to the port whose
// number they are bound to, whatever their name; one for no port is
// closed; a port with none is bound here. Each is shown serving.
func TestActivationSortsByBoundPort(t *testing.T) {
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln
	}
	api, konn, konnMisnamed, stray := listen(), listen(), listen(), listen()
	free := listen() // a free port number for "join", which systemd does not pass
	joinPort := localPort(free)
	free.Close()
	ports := []config.Port{
		{Name: "api", Port: localPort(api)},
		{Name: "konnectivity", Port: localPort(konn)},
		{Name: "join", Port: joinPort},
	}
	// Two sockets on the same port stand for two VIPs.
	konnMisnamed.Close()
	konn2, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(int(localPort(konn)))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { konn2.Close() })
	named := map[string][]net.Listener{"vip": {konn, api}, "join": {konn2}, "old": {stray}}
	set, err := fromActivation(context.Background(), named, config.VIP{Addresses: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}, ports)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	for name, want := range map[string]int{"api": 1, "konnectivity": 2, "join": 1} {
		if got := len(set.Ports[name]); got != want {
			t.Errorf("port %s has %d listeners; want %d", name, got, want)
		}
		for _, l := range set.Ports[name] {
			if got := localPort(l); got != ports[slices.IndexFunc(ports, func(p config.Port) bool { return p.Name == name })].Port {
				t.Errorf("port %s got a listener on %d", name, got)
			}
		}
	}
	if _, aerr := stray.Accept(); !errors.Is(aerr, net.ErrClosed) {
		t.Errorf("the socket for no configured port was left open")
	}
	notes := strings.Join(set.Notes, "\n")
	for _, want := range []string{`named "old"`, `named "join" on 127.0.0.2`, "port join (" + strconv.Itoa(int(joinPort)) + "): systemd passed no socket"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes %q do not say %q", notes, want)
		}
	}
	// The port bound here serves.
	c, err := net.Dial("tcp", set.Ports["join"][0].Addr().String())
	if err != nil {
		t.Fatalf("dial the join port bound without systemd: %v", err)
	}
	c.Close()
}

// flakyListener fails Accept with the given errors before succeeding.
type flakyListener struct {
	net.Listener
	errs []error
}

func (f *flakyListener) Accept() (net.Conn, error) {
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	return f.Listener.Accept()
}

func TestBackoffSurvivesDescriptorExhaustion(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	emfile := &net.OpError{Op: "accept", Err: &osSyscallErr{syscall.EMFILE}}
	var seen []string
	b := NewBackoff(&flakyListener{Listener: ln, errs: []error{emfile, emfile, syscall.ENFILE}}, 20*time.Millisecond,
		func(err error) { seen = append(seen, Reason(err)) })
	defer b.Close()
	go func() {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			defer c.Close()
			time.Sleep(time.Second)
		}
	}()
	c, err := b.Accept()
	if err != nil {
		t.Fatalf("Accept after transient errors: %v", err)
	}
	c.Close()
	if strings.Join(seen, ",") != "emfile,emfile,enfile" {
		t.Errorf("backed-off errors = %v", seen)
	}
}

func TestBackoffCloseEndsWait(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 1000)
	for i := range errs {
		errs[i] = syscall.EMFILE
	}
	b := NewBackoff(&flakyListener{Listener: ln, errs: errs}, time.Hour, nil)
	done := make(chan error, 1)
	go func() { _, err := b.Accept(); done <- err }()
	time.Sleep(50 * time.Millisecond)
	b.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close = %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept still waiting 10 s after Close")
	}
}

func TestNonTransientErrorIsReturned(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := NewBackoff(&flakyListener{Listener: ln, errs: []error{syscall.EBADF}}, time.Millisecond, nil)
	defer b.Close()
	if _, err := b.Accept(); !errors.Is(err, syscall.EBADF) {
		t.Errorf("Accept = %v, want EBADF passed through", err)
	}
}

type osSyscallErr struct{ errno syscall.Errno }

func (e *osSyscallErr) Error() string { return "accept4: " + e.errno.Error() }
func (e *osSyscallErr) Unwrap() error { return e.errno }

// TestReusePortSharesWithAWildcardListener: a program listening on every
// address with SO_REUSEPORT (RKE2's kube-apiserver started with
// --permit-port-sharing=true) keeps vipproxy from binding the VIP at that
// port, unless vip.reuse_port; then connections to the VIP reach vipproxy
// alone and those to another local address the program.
func TestReusePortSharesWithAWildcardListener(t *testing.T) {
	holder := testutil.WildcardListener(t, true)
	port := uint16(holder.Addr().(*net.TCPAddr).Port)
	vip := config.VIP{Addresses: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}

	if ls, err := OpenPort(context.Background(), vip, port); !errors.Is(err, syscall.EADDRINUSE) {
		closeListeners(ls)
		t.Fatalf("without reuse_port: OpenPort = %v; want address in use", err)
	}
	vip.ReusePort = true
	ls, err := OpenPort(context.Background(), vip, port)
	if err != nil {
		t.Fatalf("with reuse_port: %v", err)
	}
	defer closeListeners(ls)
	for _, c := range []struct {
		dial string
		want net.Listener
	}{{"127.0.0.1", ls[0]}, {"127.0.0.2", holder}, {"127.0.0.1", ls[0]}} {
		if got := acceptedBy(t, net.JoinHostPort(c.dial, strconv.Itoa(int(port))), ls[0], holder); got != c.want {
			t.Errorf("a connection to %s:%d went to %v; want %v", c.dial, port, got.Addr(), c.want.Addr())
		}
	}
}

func closeListeners(ls []net.Listener) {
	for _, l := range ls {
		l.Close()
	}
}

// acceptedBy dials addr and returns which of the listeners accepted it:
// the connection waits in exactly one listener's queue.
func acceptedBy(t *testing.T, addr string, listeners ...net.Listener) net.Listener {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, l := range listeners {
		tl := l.(*net.TCPListener)
		tl.SetDeadline(time.Now().Add(time.Second))
		if a, err := tl.Accept(); err == nil {
			a.Close()
			return l
		}
	}
	t.Fatalf("no listener accepted %s", addr)
	return nil
}

// TestCanBindBothFamilies: the bind test of a port takes every VIP, IPv6
// ones too (it panicked on one), and says when one is taken. The VIPs are
// TEST-NET and documentation addresses, bound with IP_FREEBIND and never
// sent to.
func TestCanBindBothFamilies(t *testing.T) {
	holder, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skip("no IPv6 loopback:", err)
	}
	defer holder.Close()
	port := uint16(holder.Addr().(*net.TCPAddr).Port)
	for _, reuse := range []bool{false, true} {
		vip := config.VIP{Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.57"), netip.MustParseAddr("2001:db8::57")}, ReusePort: reuse}
		if err := CanBind(vip, port); err != nil {
			t.Errorf("CanBind(%v, %d) = %v; want nil (both free)", vip, port, err)
		}
		vip.Addresses = append(vip.Addresses, netip.MustParseAddr("::1"))
		if err := CanBind(vip, port); !errors.Is(err, syscall.EADDRINUSE) {
			t.Errorf("CanBind(%v, %d) = %v; want address in use ([::1] is held)", vip, port, err)
		}
	}
}

// A socket systemd passes bound otherwise than vip.reuse_port says (its
// unit not rewritten or not restarted since the key changed) is served and
// noted, with the fix: without SO_REUSEPORT it keeps RKE2's apiserver from
// binding *:6443 beside it.
func TestActivatedSocketReusePortMismatchNoted(t *testing.T) {
	ctx := context.Background()
	vip := netip.MustParseAddr("127.0.0.1")
	for _, c := range []struct {
		bound, key bool
		want       string
	}{
		{false, true, "without SO_REUSEPORT, but vip.reuse_port is true"},
		{true, false, "with SO_REUSEPORT, but vip.reuse_port is false"},
		{true, true, ""},
		{false, false, ""},
	} {
		ln, err := freeBind(ctx, netip.AddrPortFrom(vip, 0), c.bound)
		if err != nil {
			t.Fatal(err)
		}
		ports := []config.Port{{Name: "api", Port: localPort(ln)}}
		set, err := fromActivation(ctx, map[string][]net.Listener{"vip": {ln}}, config.VIP{Addresses: []netip.Addr{vip}, ReusePort: c.key}, ports)
		if err != nil {
			t.Fatal(err)
		}
		notes := strings.Join(set.Notes, "\n")
		set.Close()
		if len(set.Ports["api"]) != 1 {
			t.Errorf("bound with SO_REUSEPORT %v, vip.reuse_port %v: the socket is not served", c.bound, c.key)
		}
		switch {
		case c.want == "" && notes != "":
			t.Errorf("bound with SO_REUSEPORT %v, vip.reuse_port %v: notes %q, want none", c.bound, c.key, notes)
		case c.want != "" && (!strings.Contains(notes, c.want) || !strings.Contains(notes, "vipproxy units write")):
			t.Errorf("bound with SO_REUSEPORT %v, vip.reuse_port %v: notes %q, want %q and the fix", c.bound, c.key, notes, c.want)
		}
	}
}

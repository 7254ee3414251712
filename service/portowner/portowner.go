// Package portowner finds who listens on a TCP port: the sockets in
// /proc/net/tcp and tcp6 (this network namespace), then the processes
// holding them (/proc/PID/fd links to socket:[INODE]) and their systemd
// units. vipproxy uses it to say who holds the VIP port, and how to fix it,
// instead of a bare "address already in use".
package portowner

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Listener is one listening socket on the port.
type Listener struct {
	Addr  netip.AddrPort
	Inode uint64
	// PID and Command are 0 and "" when no visible process holds the socket
	// (another user's process seen without root, or a sandbox with
	// ProtectProc=invisible).
	PID     int
	Command string
	// Unit is the systemd unit of the process ("" if none or not known).
	Unit string
}

// Wildcard reports whether the socket listens on every address.
func (l Listener) Wildcard() bool { return l.Addr.Addr().IsUnspecified() }

// String names the socket and its holder, e.g.
// "*:6443 (kube-apiserver, pid 812, unit kubelet.service)".
func (l Listener) String() string {
	addr := l.Addr.String()
	if l.Wildcard() {
		addr = "*:" + strconv.Itoa(int(l.Addr.Port()))
		if l.Addr.Addr().Is6() {
			addr = "[::]:" + strconv.Itoa(int(l.Addr.Port()))
		}
	}
	if l.PID == 0 {
		return addr + " (process not visible from here: run `vipproxy doctor` as root)"
	}
	s := fmt.Sprintf("%s (%s, pid %d", addr, l.Command, l.PID)
	if l.Unit != "" {
		s += ", unit " + l.Unit
	}
	return s + ")"
}

// Listeners returns the listening TCP sockets on port in this network
// namespace, read from procRoot ("/proc"), with their holders where visible.
func Listeners(procRoot string, port uint16) ([]Listener, error) {
	var out []Listener
	for _, f := range []string{"net/tcp", "net/tcp6"} {
		ls, err := readTable(filepath.Join(procRoot, f), port)
		if err != nil && !os.IsNotExist(err) { // no tcp6 without IPv6
			return nil, err
		}
		out = append(out, ls...)
	}
	if len(out) == 0 {
		return nil, nil
	}
	holders := socketHolders(procRoot)
	for i := range out {
		if pid, ok := holders[out[i].Inode]; ok {
			out[i].PID = pid
			out[i].Command = command(procRoot, pid)
			out[i].Unit = unit(procRoot, pid)
		}
	}
	return out, nil
}

// tcpListen is the state column's value for LISTEN (include/net/tcp_states.h).
const tcpListen = "0A"

func readTable(path string, port uint16) ([]Listener, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Listener
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != tcpListen {
			continue
		}
		addr, err := parseAddr(fields[1])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if addr.Port() != port {
			continue
		}
		inode, _ := strconv.ParseUint(fields[9], 10, 64)
		out = append(out, Listener{Addr: addr, Inode: inode})
	}
	return out, sc.Err()
}

// parseAddr reads "0100007F:1F90": the address as the kernel's 32-bit
// words printed in host byte order, then the port in hex.
func parseAddr(s string) (netip.AddrPort, error) {
	hexAddr, hexPort, ok := strings.Cut(s, ":")
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if !ok || err != nil || (len(hexAddr) != 8 && len(hexAddr) != 32) {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	raw, err := hex.DecodeString(hexAddr)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	b := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(b[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}

// socketHolders maps socket inodes to the first visible process holding
// them. Processes that vanish or hide while it looks are skipped.
func socketHolders(procRoot string) map[uint64]int {
	out := map[uint64]int{}
	pids, _ := os.ReadDir(procRoot)
	for _, p := range pids {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		fdDir := filepath.Join(procRoot, p.Name(), "fd")
		fds, _ := os.ReadDir(fdDir)
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
			if err != nil {
				continue
			}
			if s, ok := strings.CutPrefix(link, "socket:["); ok {
				if inode, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64); err == nil {
					if _, seen := out[inode]; !seen {
						out[inode] = pid
					}
				}
			}
		}
	}
	return out
}

func command(procRoot string, pid int) string {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "comm"))
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// unit reads the process's systemd unit from its cgroup (v2:
// "0::/system.slice/k3s.service").
func unit(procRoot string, pid int) string {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok {
			for _, part := range strings.Split(path, "/") {
				if strings.HasSuffix(part, ".service") || strings.HasSuffix(part, ".socket") || strings.HasSuffix(part, ".scope") {
					return part
				}
			}
		}
	}
	return ""
}

package testutil

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// EpollTargets maps the inode of every file some epoll of this process
// watches to those epolls' descriptors (/proc/self/fdinfo).
func EpollTargets(t *testing.T) map[uint64][]int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	out := map[uint64][]int{}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if link, _ := os.Readlink("/proc/self/fd/" + e.Name()); link != "anon_inode:[eventpoll]" {
			continue
		}
		f, err := os.Open(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
		if err != nil {
			continue // closed meanwhile
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// tfd:        9 events:       19 data: ... pos:0 ino:2ba5 sdev:8
			fields := strings.Fields(sc.Text())
			if len(fields) == 0 || fields[0] != "tfd:" {
				continue
			}
			for _, fl := range fields {
				if hex, ok := strings.CutPrefix(fl, "ino:"); ok {
					ino, err := strconv.ParseUint(hex, 16, 64)
					if err != nil {
						t.Fatalf("fdinfo of epoll %d: %q", fd, sc.Text())
					}
					out[ino] = append(out[ino], fd)
				}
			}
		}
		f.Close()
	}
	return out
}

// Inode is the inode of the file fd refers to.
func Inode(t *testing.T, fd int) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

package standin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"
)

// endpointsPoll is how often --endpoints-file is read again: a VM test
// edits the file and waits for the watch event, so a fraction of a second.
const endpointsPoll = 200 * time.Millisecond

// readEndpointsFile parses one host:port a line ('#' starts a comment);
// a missing file is an empty set, as a cluster with no live apiserver.
func readEndpointsFile(path string) ([]netip.AddrPort, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read endpoints file: %w", err)
	}
	var addrs []netip.AddrPort
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		if text = strings.TrimSpace(text); text == "" {
			continue
		}
		ap, err := netip.ParseAddrPort(text)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		addrs = append(addrs, ap)
	}
	return addrs, sc.Err()
}

// followEndpointsFile sets the slices from path now and whenever its
// content changes, until ctx ends. A file that does not parse is logged
// and the last good set kept: the slices never change half-way.
func followEndpointsFile(ctx context.Context, path string, eps *EndpointSlices, log *slog.Logger) error {
	cur, err := readEndpointsFile(path)
	if err != nil {
		return err
	}
	eps.SetAddrs(cur...)
	log.Info("endpoints set", "file", path, "endpoints", fmt.Sprint(cur))
	go func() {
		t := time.NewTicker(endpointsPoll)
		defer t.Stop()
		var lastErr string
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			next, err := readEndpointsFile(path)
			if err != nil {
				if err.Error() != lastErr {
					log.Error("endpoints file refused, keeping the last set", "err", err)
					lastErr = err.Error()
				}
				continue
			}
			lastErr = ""
			if slices.Equal(next, cur) {
				continue
			}
			cur = next
			eps.SetAddrs(cur...)
			log.Info("endpoints set", "file", path, "endpoints", fmt.Sprint(cur))
		}
	}()
	return nil
}

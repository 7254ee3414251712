package discovery

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"time"

	"github.com/vipproxy/vipproxy/service/atomicfile"
)

// StateFile is the last known set's file name in the state directory.
const StateFile = "discovered.json"

// maxStateFile bounds the state file read at start.
const maxStateFile = 1 << 20

type stateDoc struct {
	// Backends are the members that took new connections at the time.
	Backends []netip.AddrPort `json:"backends"`
	Written  time.Time        `json:"written"`
}

// writeState replaces the state file atomically: a crash leaves the old
// set or the new one.
func writeState(path string, active []netip.AddrPort) error {
	data, err := json.MarshalIndent(stateDoc{Backends: active, Written: time.Now().UTC()}, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(data, '\n'), 0o644)
}

// readState reads the last known set; a missing file is an empty set.
func readState(path string) ([]netip.AddrPort, error) {
	data, err := readFile(path)
	if err != nil {
		if isNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	if len(data) > maxStateFile {
		return nil, fmt.Errorf("larger than %d bytes", maxStateFile)
	}
	var doc stateDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return doc.Backends, nil
}

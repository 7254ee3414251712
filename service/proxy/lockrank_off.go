//go:build !race && !vipproxy_lockrank

package proxy

// lockRankChecked: Lock does not check the lock order in this build
// (lockrank_check.go does).
const lockRankChecked = false

func (m *rankedMutex[R]) Lock()   { m.mu.Lock() }
func (m *rankedMutex[R]) Unlock() { m.mu.Unlock() }

//go:build !race && !vipproxy_lockrank

package engine

// LockRankChecked: Lock does not check the lock order in this build
// (lockrank_check.go does).
const LockRankChecked = false

func (m *Mutex[R]) Lock()   { m.mu.Lock() }
func (m *Mutex[R]) Unlock() { m.mu.Unlock() }

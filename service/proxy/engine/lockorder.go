package engine

import "sync"

// lockRank is a lock's place in the lock order of the data path (the
// package doc), which spans this package and the connection layer above
// it (service/proxy): a goroutine that holds a lock takes only locks of a
// higher rank.
type lockRank uint8

const (
	rankPark    lockRank = iota + 1 // parkState.mu, a direction's standing with the parker
	rankSession                     // session.mu (service/proxy)
	rankParker                      // parker.mu
	rankFile                        // fileConn.mu
	rankPipes                       // pipePool.mu
	rankKeep                        // keepLater.mu
)

var rankNames = [...]string{rankPark: "parkState.mu", rankSession: "session.mu", rankParker: "parker.mu",
	rankFile: "fileConn.mu", rankPipes: "pipePool.mu", rankKeep: "keepLater.mu"}

func (r lockRank) String() string { return rankNames[r] }

// ranked names a lock's rank in its type: Mutex[parkLock] is a
// parkState's mutex. Every rank is declared here, those of the
// connection layer's locks too (SessionLock), so that one order holds
// across both packages.
type ranked interface{ rank() lockRank }

type (
	parkLock struct{}
	// SessionLock ranks the connection layer's session.mu.
	SessionLock struct{}
	parkerLock  struct{}
	fileLock    struct{}
	pipesLock   struct{}
	keepLock    struct{}
)

func (parkLock) rank() lockRank    { return rankPark }
func (SessionLock) rank() lockRank { return rankSession }
func (parkerLock) rank() lockRank  { return rankParker }
func (fileLock) rank() lockRank    { return rankFile }
func (pipesLock) rank() lockRank   { return rankPipes }
func (keepLock) rank() lockRank    { return rankKeep }

// Mutex is every mutex of the data path, its rank in its type. In a
// normal build it is a sync.Mutex and costs nothing more; built with the
// race detector (or the tag vipproxy_lockrank) each Lock checks the order
// first (lockrank_check.go), so every test run under -race holds it.
type Mutex[R ranked] struct {
	mu sync.Mutex
}

// Package engine is the I/O engine of the data path: it relays a
// connection's two sockets, both ways, until both directions end. The
// connection layer above it (service/proxy: pick, dial and retry, replay,
// failover, evacuation, handover) hands it a connection through Conn and
// Start, and reaches a running relay through Relay only: StopParking
// before it closes a socket, IdleMark, TryFreeze and Thaw. Sockets are
// accepted (AcceptRaw) and dialed (Engine.Dial) with system calls of its
// own and kept out of Go's poller until a goroutine must wait on one
// (FileConn, fdRefs); idle directions wait in a parker's epoll without a
// goroutine (park.go), which passes small messages on itself and
// coalesces storms of pushes (coalesce.go); bulk moves by splice through
// pooled pipes (pipes.go).
//
// The engine never closes a socket it did not create: a client or a
// backend socket closes through the connection layer (Conn.CloseSockets,
// Conn.AbortSockets), whose closeClient and closeBackend are the only
// closers (service/proxy TestOnlyTheClosersCloseSockets reads the source
// of both packages). It closes only its own: the parkers' epolls, the
// splice pipes, the duplicates of a socket in Go's poller, and a
// descriptor at its last reference after the closer's Close (fdRefs).
//
// Lock order. Every mutex of the data path is a Mutex whose type names
// its rank (lockorder.go), and a goroutine that holds one takes only
// locks of a higher rank, in this order: parkState.mu (a direction's
// pk.mu: the parker passes a message on under it, keeping the client's
// bytes in the session and binding the backend), session.mu (the
// connection layer's: failover writes the replay and closes the socket
// it replaces under it), parker.mu, fileConn.mu, pipePool.mu,
// keepLater.mu; no two locks of one rank are held at once. Built with the
// race detector (or -tags vipproxy_lockrank), each Lock checks that order
// and panics on a breach, so every test run under -race holds it, across
// both packages (TestLockOrderIsChecked, TestEveryLockIsRanked).
package engine

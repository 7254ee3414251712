package proxy

// Descriptors kept apart from client connections when the connection cap
// is derived from the descriptor limit.
const (
	// reservedBase: listeners, epoll, stdio, the journal, the Go runtime.
	reservedBase = 64
	// reservedReload: the config file, CA, client certificate and key
	// that a reload reads.
	reservedReload = 16
	// fdsPerConnection: the client socket and the backend socket.
	fdsPerConnection = 2
)

// DerivedMaxConnections is the cap on open client connections that fits
// in nofile descriptors, as HAProxy derives maxconn from the limit. Past
// the limit, accept fails with EMFILE and so do the health checks and the
// admin endpoint; under the cap a client flood is refused instead, and
// the descriptors kept apart stay free: an eighth of the table for splice
// pipes (a direction that gets none copies instead) and for the duplicate
// a socket gets when a goroutine must wait on it (fileConn.promote: a
// connection that carries bulk or whose peer reads slowly; one that
// gets none ends, logged as our shortage), two per backend for
// the health checks, adminConns for the admin endpoint, and a few for
// reloads and the process itself. It is at least 1.
func DerivedMaxConnections(nofile uint64, backends, adminConns int) int {
	reserve := uint64(reservedBase+reservedReload+adminConns+2*backends) + nofile/8
	if nofile <= reserve+fdsPerConnection {
		return 1
	}
	return int(min((nofile-reserve)/fdsPerConnection, 1<<30))
}

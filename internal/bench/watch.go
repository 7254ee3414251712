package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// The watch protocol, a stand-in for a Kubernetes watch over mTLS: the
// client sends "WATCH <id>\n", the backend answers "ACK <backend> <last>\n"
// (the watch works from here on; last is the latest event sent so far)
// and then one event line every period, all backends on the same clock:
// event k is sent at epoch + k*period, so a client that changes backend
// sees the sequence go on, and a gap is an event it missed while it had
// no watch.
const (
	watchAck   = "ACK"
	watchEvent = "EV"
	// eventPad makes an event about the size of a small watch event
	// (a Lease or an Endpoints update is a few hundred bytes).
	eventPad = 200
)

// watchBackend is one TLS watch server of the storm figures.
type watchBackend struct {
	id     int
	tls    *tls.Config
	period time.Duration
	epoch  time.Time
}

// run serves watches on listen until ctx ends.
func (b *watchBackend) run(ctx context.Context, listen string) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", listen)
	if err != nil {
		return fmt.Errorf("watch backend listen %s: %w", listen, err)
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for ctx.Err() == nil {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			time.Sleep(10 * time.Millisecond) // EMFILE: wait for descriptors
			continue
		}
		go b.serve(ctx, c)
	}
	return nil
}

// serve answers one watch: the handshake and the request within 30 s (a
// health check that only connects is closed then; the clients give up
// after 10 s, as client-go does), the ACK, then events.
func (b *watchBackend) serve(ctx context.Context, raw net.Conn) {
	defer raw.Close()
	c := tls.Server(raw, b.tls)
	c.SetDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReaderSize(c, 256).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "WATCH ") {
		return
	}
	c.SetDeadline(time.Time{})
	last := int64(time.Since(b.epoch) / b.period)
	if _, err := fmt.Fprintf(c, "%s %d %d\n", watchAck, b.id, last); err != nil {
		return
	}
	// The client never sends more: a read returns when it goes away.
	gone := make(chan struct{})
	go func() {
		var buf [1]byte
		c.Read(buf[:])
		close(gone)
	}()
	pad := strings.Repeat("x", eventPad)
	for {
		k := int64(time.Since(b.epoch)/b.period) + 1
		t := time.NewTimer(time.Until(b.epoch.Add(time.Duration(k) * b.period)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-gone:
			t.Stop()
			return
		case <-t.C:
		}
		c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(c, "%s %d %s\n", watchEvent, k, pad); err != nil {
			return
		}
	}
}

// parseWatchLine reads an ACK or an event line: its kind and its first
// two numbers (ACK: backend, latest event; event: its number, 0).
func parseWatchLine(line string) (kind string, n, m int64, err error) {
	f := strings.Fields(line)
	if len(f) < 3 || (f[0] != watchAck && f[0] != watchEvent) {
		return "", 0, 0, fmt.Errorf("unexpected watch line %.40q", line)
	}
	n, err = strconv.ParseInt(f[1], 10, 64)
	if err == nil && f[0] == watchAck {
		m, err = strconv.ParseInt(f[2], 10, 64)
	}
	if err != nil {
		return "", 0, 0, fmt.Errorf("watch line %.40q: %w", line, err)
	}
	return f[0], n, m, nil
}

package doctor

import (
	"context"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// answerer reads one packet that came in after a question (an ARP probe,
// a neighbour solicitation) and returns who answered (a MAC address), or
// "" when the packet is not an answer to that question.
type answerer func(pkt []byte, from unix.Sockaddr) string

// askThreeTimes sends question to dst on fd three times, spread evenly
// over wait (or what is left of ctx's deadline, if sooner), and returns
// every distinct answer read in between: one lost packet on a busy link
// does not make a holder of the VIP look absent.
func askThreeTimes(ctx context.Context, fd int, question []byte, dst unix.Sockaddr, wait time.Duration, answer answerer) ([]string, error) {
	deadline := time.Now().Add(wait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	buf := make([]byte, 1500)
	var found []string
	for i := range 3 {
		if err := unix.Sendto(fd, question, 0, dst); err != nil {
			return nil, err
		}
		until := time.Now().Add(time.Until(deadline) / time.Duration(3-i))
		found = readAnswers(fd, buf, until, answer, found)
	}
	return found, nil
}

// readAnswers adds every answer read on fd until the deadline to found,
// each once.
func readAnswers(fd int, buf []byte, until time.Time, answer answerer, found []string) []string {
	for {
		left := time.Until(until)
		if left <= 0 {
			return found
		}
		tv := unix.NsecToTimeval(left.Nanoseconds())
		if unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv) != nil {
			return found
		}
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return found // the timeout: nothing more came
		}
		if who := answer(buf[:n], from); who != "" && !slices.Contains(found, who) {
			found = append(found, who)
		}
	}
}

package natsembed

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lowestPort is the first port FreePort hands out: below it are the
// well-known and commonly registered services.
const lowestPort = 10000

// FreePort returns a TCP port on host that was free a moment ago. Cluster
// members must know each other's route ports before any of them starts,
// and a supervisor must tell a child where to listen before it runs.
//
// The port comes from below the kernel's ephemeral range, so the outgoing
// connections made between the check and the bind (a client dialling NATS
// or the apiserver gets its local port from that range) cannot take it;
// a port from the range itself, as `:0` gives, can be taken that way.
func FreePort(host string) (int, error) {
	high := ephemeralLow()
	if high > lowestPort {
		for range 64 {
			p := lowestPort + rand.IntN(high-lowestPort)
			if l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p))); err == nil {
				l.Close()
				return p, nil
			}
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("natsembed: free port on %s: %w", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range: Linux's
// ip_local_port_range, or the IANA range's start elsewhere.
func ephemeralLow() int {
	const iana = 49152
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return iana
	}
	low, err := strconv.Atoi(strings.Fields(string(b) + " x")[0])
	if err != nil {
		return iana
	}
	return low
}

// Command httpprobe is a container probe for images without a shell: it
// GETs one URL and exits 0 on a 2xx answer, 1 otherwise, printing why. The
// NATS image's probes exec it against the monitoring port, which listens on
// loopback only (deploy/nats), where the kubelet's HTTP probes cannot reach.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

func run(args []string, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: httpprobe URL")
		return 2
	}
	// Within the kubelet's default probe timeout (1 s) with room to spare.
	ctx, cancel := context.WithTimeout(context.Background(), 900*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil)
	if err != nil {
		fmt.Fprintln(stderr, "httpprobe:", err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "httpprobe:", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		fmt.Fprintf(stderr, "httpprobe: %s: %s %s\n", args[0], resp.Status, body)
		return 1
	}
	return 0
}

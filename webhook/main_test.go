package webhook_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The unit tests start TLS servers and clients: none may leave a goroutine
// behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

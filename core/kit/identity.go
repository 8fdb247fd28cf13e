package kit

import (
	"fmt"
	"os"
)

// DefaultIdentity names this process for Inspector: "hostname-pid".
func DefaultIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

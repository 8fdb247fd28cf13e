package torture

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"

	"go.uber.org/goleak"
)

var long = flag.Bool("torture.long", false, "run the long torture: more workers, longer, each fault repeated")

func TestMain(m *testing.M) {
	if os.Getenv(envWorker) != "" {
		os.Exit(workerMain())
	}
	code := m.Run()
	if s := results.String(); s != "" {
		fmt.Print(s)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// results collects the summary table's rows across the tests of this
// process.
var results summary

type summary struct {
	mu   sync.Mutex
	rows []row
}

type row struct {
	backend, fault string
	st             stats
}

func (s *summary) add(backend, fault string, st stats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows = append(s.rows, row{backend, fault, st})
}

// String renders the table, or "" when no run finished.
func (s *summary) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.rows) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\ntorture summary (lost updates and reused tokens must be 0; every overlap must be fenced)\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "backend\tfault\tops\tops/s\toverlaps\tunfenced\tstale refused\tlost updates\treused tokens\t")
	for _, r := range s.rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%d\t%d\t%d\t%d\t%d\t\n", r.backend, r.fault,
			r.st.ops, r.st.rate(), r.st.overlaps, r.st.uncaught, r.st.stale(), r.st.lost, r.st.reused)
	}
	_ = tw.Flush()
	return b.String()
}

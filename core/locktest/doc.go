// Package locktest is the conformance suite every distlock backend passes, in
// the style of testing/fstest: a backend's test calls TestProvider with a way
// to make its Provider, and the suite checks every rule of the core contract
// against it.
//
//	func TestConformance(t *testing.T) {
//		locktest.TestProvider(t, locktest.Config{
//			New: func(t testing.TB) core.Provider { return newProvider(t) },
//		})
//	}
//
// The mutex cases run four times: against Mutex, against the write side of
// RWMutex, against a Semaphore of 1, and against a Semaphore of 5 with 4
// slots already taken. Reader-writer and semaphore cases follow, then the
// holder a core.Inspector reports (for Lockers that implement it), lost
// handles and abandonment by a dying process (the test binary re-runs
// itself as the child, as the os/exec tests do).
//
// A backend that does not offer a primitive returns core.ErrUnsupported from
// its acquire calls; the suite then skips that primitive's cases.
//
// BenchmarkProvider is the matching benchmark suite.
package locktest

package kit

import "context"

// WithCheck returns a context that is ctx, except that each call to its Err
// and Done first calls check, which cancels ctx when it finds that ctx
// should have ended already. It is how a context follows a condition only
// the clock reveals, such as a lease's trust window that has closed: after
// a GC pause, a VM freeze or SIGSTOP the timer that would end ctx has not
// fired yet, and an Err that only read ctx would still say it is live.
//
// check must not block, and must either cancel ctx or leave it alone. As
// check runs before Err or Done reads ctx, Err is non-nil exactly when Done
// is closed, at every call.
//
// A child made with context.WithCancel and the like attaches to ctx's own
// cancellation, as cheaply as to ctx itself, and check runs once as it is
// made, so a child of a context past its window is born done. The child's
// own Err does not call check: it ends when ctx is cancelled, by check on
// this context or by whatever else cancels ctx (a Keeper's timer). Value
// does not call check either, so read Err before context.Cause.
func WithCheck(ctx context.Context, check func()) context.Context {
	return checkedContext{Context: ctx, check: check}
}

type checkedContext struct {
	context.Context
	check func()
}

func (c checkedContext) Err() error {
	c.check()
	return c.Context.Err()
}

func (c checkedContext) Done() <-chan struct{} {
	c.check()
	return c.Context.Done()
}

package kit

import (
	"context"
	"log/slog"

	"github.com/distlock/distlock/core"
)

// logEvents is the Observer that writes a Provider's events to its
// logger (each backend's WithLogger), so that every backend logs the same
// lines with the same attributes (OBSERVABILITY.md lists them): a lost
// lock and a failed release or renewal at Warn, each acquire and release
// at Debug.
type logEvents struct{ log *slog.Logger }

// newLogEvents returns the Observer of log, or nil when log is nil or
// discards everything.
func newLogEvents(log *slog.Logger) core.Observer {
	if log == nil || log.Handler() == slog.DiscardHandler {
		return nil
	}
	return logEvents{log}
}

func (l logEvents) Observe(ctx context.Context, e core.Event) {
	level, msg := slog.LevelDebug, ""
	switch e.Kind {
	case core.EventAcquire:
		msg = "distlock: acquired"
		if e.Err != nil {
			msg = "distlock: acquire failed"
		}
	case core.EventRelease:
		msg = "distlock: released"
		if e.Err != nil {
			level, msg = slog.LevelWarn, "distlock: release failed"
		}
	case core.EventLost:
		level, msg = slog.LevelWarn, "distlock: lock lost"
	case core.EventRenew:
		if e.Err == nil {
			return // every lease, every interval
		}
		level, msg = slog.LevelWarn, "distlock: lease renewal failed"
	default:
		return
	}
	if !l.log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("backend", e.Backend),
		slog.String("primitive", e.Primitive),
		slog.String("lock", e.Name),
	}
	if e.Token != 0 {
		attrs = append(attrs, slog.Uint64("token", e.Token))
	}
	if e.Kind == core.EventAcquire {
		attrs = append(attrs, slog.String("outcome", e.Outcome()), slog.Duration("took", e.Duration))
	}
	if e.Handoff != "" {
		attrs = append(attrs, slog.String("handoff", e.Handoff))
	}
	if e.Held != 0 {
		attrs = append(attrs, slog.Duration("held", e.Held))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.Any("err", e.Err))
	}
	l.log.LogAttrs(ctx, level, msg, attrs...)
}

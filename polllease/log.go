package polllease

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/distlock/distlock/core"
)

// newLogger returns cfg.Logger with the instance attribute, whose records
// carry the target under cfg.TargetKey. The code logs the target as
// "target" everywhere; renaming it in one handler keeps every line,
// present and future, under the name the user chose.
func newLogger(cfg Config) *slog.Logger {
	log := cfg.Logger
	if cfg.TargetKey != DefaultTargetKey {
		log = slog.New(renameHandler{next: log.Handler(), from: DefaultTargetKey, to: cfg.TargetKey})
	}
	return log.With(slog.String("instance", cfg.InstanceID))
}

// renameHandler passes records on to next with the top-level attribute
// from renamed to.
type renameHandler struct {
	next     slog.Handler
	from, to string
}

func (h renameHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h renameHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.rename(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h renameHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	renamed := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		renamed[i] = h.rename(a)
	}
	return renameHandler{next: h.next.WithAttrs(renamed), from: h.from, to: h.to}
}

// WithGroup nests what follows in a group, where the target attribute is
// not at the top level any more: it is left as it is.
func (h renameHandler) WithGroup(name string) slog.Handler { return h.next.WithGroup(name) }

func (h renameHandler) rename(a slog.Attr) slog.Attr {
	if a.Key == h.from {
		a.Key = h.to
	}
	return a
}

// logEvent logs e: acquired, released and resumed at Info, lost and
// uncertain at Warn, renewed at Config.RoutineLevel.
func (c *Coordinator) logEvent(ctx context.Context, e Event) {
	level := slog.LevelInfo
	switch e.Kind {
	case EventLost, EventUncertain:
		level = slog.LevelWarn
	case EventRenewed:
		level = c.cfg.RoutineLevel.Level()
	}
	if !c.log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{slog.String("target", e.Target), slog.Uint64("token", e.Token)}
	if e.Reason != "" {
		attrs = append(attrs, slog.String("reason", string(e.Reason)))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.Any("error", e.Err))
	}
	c.log.LogAttrs(ctx, level, "Lease "+e.Kind.String(), attrs...)
}

// logPollStart logs the start of a poll of l at Config.RoutineLevel.
func (c *Coordinator) logPollStart(ctx context.Context, l *lease) {
	level := c.cfg.RoutineLevel.Level()
	if c.log.Enabled(ctx, level) {
		c.log.LogAttrs(ctx, level, "Poll started", slog.String("target", l.target), slog.Uint64("token", l.token))
	}
}

// logBusy logs at Debug an acquire of target that found the lease held,
// with its holder when the backend can tell (core.Inspector). Asking the
// holder is a round trip, made only when Debug is enabled, within what is
// left of the attempt's ctx, and never longer than a second.
func (c *Coordinator) logBusy(ctx context.Context, target string, err error) {
	if !errors.Is(err, core.ErrNotAcquired) || !c.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	attrs := []slog.Attr{slog.String("target", target)}
	if in, ok := c.cfg.Provider.Mutex(c.cfg.LeaseName(target)).(core.Inspector); ok {
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		h, held, herr := in.Holder(hctx)
		cancel()
		if herr == nil && held {
			attrs = append(attrs, slog.String("owner", h.ID), slog.Uint64("token", h.Token))
		}
	}
	attrs = append(attrs, slog.Any("error", err))
	c.log.LogAttrs(ctx, slog.LevelDebug, "Lease busy", attrs...)
}

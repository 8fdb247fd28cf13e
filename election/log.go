package election

import (
	"context"
	"log/slog"
)

// log writes ev to Config.Logger: the same message for the same kind of
// event in every election, with the attributes that kind has.
func (e *Election) log(ev Event) {
	level, msg := slog.LevelInfo, ""
	switch ev.Kind {
	case Promoted:
		msg = "distlock: election won"
	case Demoted:
		msg = "distlock: election term ended"
	case LeaderChanged:
		msg = "distlock: election leader changed"
	case CampaignFailed:
		level, msg = slog.LevelWarn, "distlock: election campaign failed"
	case ReleaseFailed:
		level, msg = slog.LevelWarn, "distlock: election release failed; the lock frees when its lease ends"
	default:
		return
	}
	ctx := context.Background()
	if !e.cfg.Logger.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{slog.String("group", ev.Election), slog.String("id", ev.ID)}
	if ev.Term != 0 {
		attrs = append(attrs, slog.Uint64("term", ev.Term))
	}
	if ev.Leader != "" {
		attrs = append(attrs, slog.String("leader", ev.Leader))
	}
	if ev.Err != nil {
		attrs = append(attrs, slog.Any("err", ev.Err))
	}
	e.cfg.Logger.LogAttrs(ctx, level, msg, attrs...)
}

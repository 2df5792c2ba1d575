package store

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Quiet returns db for the queue's own statements: db with its logger
// kept for gorm's messages but not for statements. gorm's default logger
// writes every statement slower than 200ms whole, as SLOW SQL, and at Info
// every statement whole; the queue's are batches holding thousands of
// ids, and each one's error reaches its caller anyway. The caller's own
// statements on db, or on a transaction of theirs, are logged as before:
// Quiet changes a session of db, not db.
func Quiet(db *gorm.DB) *gorm.DB {
	return db.Session(&gorm.Session{Logger: quietLogger{db.Logger}})
}

// quietLogger is a gorm logger without statement traces.
type quietLogger struct{ logger.Interface }

func (l quietLogger) LogMode(lvl logger.LogLevel) logger.Interface {
	return quietLogger{l.Interface.LogMode(lvl)}
}

func (quietLogger) Trace(context.Context, time.Time, func() (string, int64), error) {}

package mysqldb

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// The queue's bulk enqueue streams its rows to the server with LOAD DATA
// LOCAL INFILE through readers the driver is given by name.
func init() {
	store.MySQLReaders.Register = gomysql.RegisterReaderHandler
	store.MySQLReaders.Deregister = gomysql.DeregisterReaderHandler
}

// Pool sizes of the handle Open returns. MaxOpenConns leaves room in
// MariaDB's default of 151 connections for a few processes, each a
// runner's four connections and its handlers'; as many stay idle, so that
// a busy runner does not close and reopen them (see package queue's
// Connections), until unused for ConnMaxIdleTime.
const (
	MaxOpenConns    = 40
	MaxIdleConns    = MaxOpenConns
	ConnMaxIdleTime = 5 * time.Minute
)

// DSN returns dsn, a go-sql-driver/mysql DSN
// (user:password@tcp(host:3306)/database), with the settings the queue
// needs: times bound and read as UTC (parseTime, loc=UTC), the session's
// time zone UTC, transactions at READ COMMITTED, rows an UPDATE found
// counted rather than those it changed, parameters interpolated on the
// client (one round trip a statement instead of three), and several
// statements in one call, as a schema version's SQL has. A mysql:// URL
// (mysql://user:password@host:3306/database) is read as such a DSN.
func DSN(dsn string) (string, error) {
	cfg, err := parse(dsn)
	if err != nil {
		return "", fmt.Errorf("mysqldb: %w", err)
	}
	if cfg.DBName == "" {
		return "", fmt.Errorf("mysqldb: the DSN names no database: %q", dsn)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.ClientFoundRows = true
	cfg.InterpolateParams = true
	cfg.MultiStatements = true // a schema version's SQL (Client.Migrations) runs in one call
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	cfg.Params["tx_isolation"] = "'READ-COMMITTED'"
	return cfg.FormatDSN(), nil
}

// parse reads a driver DSN, or a mysql:// URL, whose query parameters
// are the driver's.
func parse(dsn string) (*gomysql.Config, error) {
	if !strings.HasPrefix(dsn, "mysql://") {
		return gomysql.ParseDSN(dsn)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, err
	}
	cfg, err := gomysql.ParseDSN("tcp(" + u.Host + ")" + u.EscapedPath() + "?" + u.RawQuery)
	if err != nil {
		return nil, err
	}
	cfg.DBName = strings.Trim(u.Path, "/")
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	return cfg, nil
}

// Open opens the MariaDB database of dsn (see DSN) for the queue.
func Open(dsn string, config ...gorm.Option) (*gorm.DB, error) {
	full, err := DSN(dsn)
	if err != nil {
		return nil, err
	}
	opts := append([]gorm.Option{&gorm.Config{Logger: logger.Discard}}, config...)
	db, err := gorm.Open(mysql.New(mysql.Config{DSN: full, DefaultStringSize: 255}), opts...)
	if err != nil {
		return nil, fmt.Errorf("mysqldb: open: %w", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("mysqldb: open: %w", err)
	}
	sqlDB.SetMaxOpenConns(MaxOpenConns)
	sqlDB.SetMaxIdleConns(MaxIdleConns)
	sqlDB.SetConnMaxIdleTime(ConnMaxIdleTime)
	return db, nil
}

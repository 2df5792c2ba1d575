package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"
)

// MySQLReaders registers readers for LOAD DATA LOCAL INFILE 'Reader::name'
// with the MySQL driver, which this package does not import: package
// mysqldb sets them. Unset, Copy inserts with multi-row INSERTs.
var MySQLReaders struct {
	Register   func(name string, open func() io.Reader)
	Deregister func(name string)
}

// infileSeq names each load's reader.
var infileSeq atomic.Int64

// mysqlLoadJobs is LOAD DATA's statement for Copy's rows (infileRows):
// run_at and created_at by the server's clock as mysqlInsertRow has them,
// meta in hexadecimal.
const mysqlLoadJobs = `LOAD DATA LOCAL INFILE 'Reader::%s' INTO TABLE sheaf_jobs CHARACTER SET utf8mb4
	FIELDS TERMINATED BY '\t' ESCAPED BY '\\' LINES TERMINATED BY '\n'
	(kind, queue, priority, payload, correlation_id, max_attempts, backoff, @run_at, @delay, auth, run_id, period, @meta, limit_key)
	SET run_at = coalesce(@run_at, ` + mysqlNow + ` + INTERVAL @delay MICROSECOND), created_at = ` + mysqlNow + `,
		meta = UNHEX(@meta)`

// load writes jobs with LOAD DATA in tx, as a stream: several times faster
// than INSERT, on the server as on the client, as it parses no SQL per
// row. A server that takes the file only in part (LOCAL loads as IGNORE:
// a value it cannot store is a warning, and its row is cut or dropped)
// fails the load, and so does one that refuses local files; the caller
// inserts instead, and gets INSERT's error if a row is wrong.
func (s *mysql) load(ctx context.Context, tx *sql.Tx, jobs []NewJob) error {
	name := "sheaf-" + strconv.FormatInt(infileSeq.Add(1), 10)
	MySQLReaders.Register(name, func() io.Reader { return &infileRows{jobs: jobs} })
	defer MySQLReaders.Deregister(name)
	res, err := tx.ExecContext(ctx, fmt.Sprintf(mysqlLoadJobs, name))
	if err != nil {
		if code := mysqlCode(err); code == 1148 || code == 4166 { // local files refused
			s.noInfile.Store(true)
		}
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	var warnings int64
	if err := tx.QueryRowContext(ctx, "SELECT @@warning_count").Scan(&warnings); err != nil {
		return err
	}
	if n != int64(len(jobs)) || warnings > 0 {
		return fmt.Errorf("%w: LOAD DATA stored %d rows of %d, with %d warnings", errPartialLoad, n, len(jobs), warnings)
	}
	return nil
}

var errPartialLoad = errors.New("a partial load")

// infileRows reads jobs as LOAD DATA's tab-separated rows, a few at a time.
type infileRows struct {
	jobs []NewJob
	buf  bytes.Buffer
}

func (r *infileRows) Read(p []byte) (int, error) {
	for r.buf.Len() < len(p) && len(r.jobs) > 0 {
		r.row(&r.jobs[0])
		r.jobs = r.jobs[1:]
	}
	if r.buf.Len() == 0 {
		return 0, io.EOF
	}
	return r.buf.Read(p)
}

// infileRaw is a field written as it is.
type infileRaw string

// row writes j in mysqlLoadJobs' columns.
func (r *infileRows) row(j *NewJob) {
	b := &r.buf
	runAt, meta := infileRaw(`\N`), infileRaw(`\N`)
	if j.RunAt != nil {
		runAt = infileRaw(mysqlTime(*j.RunAt).(time.Time).Format("2006-01-02 15:04:05.000000"))
	}
	if j.Metadata != nil {
		meta = infileRaw(hex.EncodeToString(j.Metadata))
	}
	for i, v := range [...]any{j.Kind, j.Queue, infileRaw(strconv.Itoa(j.Priority)), j.Payload, j.Correlation,
		infileRaw(strconv.Itoa(j.Attempts)), j.Backoff, runAt, infileRaw(strconv.FormatInt(j.Delay.Microseconds(), 10)),
		j.Auth, j.RunID, j.Period, meta, j.LimitKey} {
		if i > 0 {
			b.WriteByte('\t')
		}
		switch v := v.(type) {
		case string:
			infileText(b, v)
		case *string:
			if v == nil {
				b.WriteString(`\N`)
			} else {
				infileText(b, *v)
			}
		case infileRaw:
			b.WriteString(string(v))
		}
	}
	b.WriteByte('\n')
}

// infileText writes v with LOAD DATA's escapes for the characters that
// end a field or a row, or would be read as an escape.
func infileText(b *bytes.Buffer, v string) {
	start := 0
	for i := 0; i < len(v); i++ {
		var esc string
		switch v[i] {
		case '\\':
			esc = `\\`
		case '\t':
			esc = `\t`
		case '\n':
			esc = `\n`
		case '\r':
			esc = `\r`
		case 0:
			esc = `\0`
		default:
			continue
		}
		b.WriteString(v[start:i])
		b.WriteString(esc)
		start = i + 1
	}
	b.WriteString(v[start:])
}

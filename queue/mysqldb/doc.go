// Package mysqldb opens a MariaDB database for the queue, through gorm's
// MySQL dialector and go-sql-driver/mysql (pure Go). Only programs that
// import this package link the driver: the queue reaches MariaDB through
// gorm's dialector name and database/sql.
//
//	db, err := mysqldb.Open("root@tcp(127.0.0.1:3306)/jobs")
//	client, err := queue.NewClient(db, reg)
//
// The DSN is go-sql-driver/mysql's, or a mysql:// URL; Open adds what the
// queue needs (see DSN) and sizes the pool (MaxOpenConns).
//
// # How the queue differs on MariaDB
//
// Everything package queue documents holds on MariaDB 10.11 too (MySQL 8
// lacks the INSERT ... RETURNING the queue uses). What differs:
//
//   - A claim is a short transaction: SELECT ... FOR UPDATE SKIP LOCKED,
//     then an UPDATE of the jobs it locked, so any number of processes
//     claim without taking a job twice.
//   - MariaDB has no notifications: runners in the process that enqueued
//     are woken once its transaction commits; runners in other processes
//     find new jobs, and cancellations, when they poll and renew their
//     leases.
//   - Times are DATETIME(6) in UTC, from the server's clock; JSON is
//     LONGTEXT.
//   - Migrations commit statement by statement (MariaDB commits DDL as it
//     runs it); a named lock keeps processes from migrating at once.
package mysqldb

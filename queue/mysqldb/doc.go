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
//     then an UPDATE of the jobs it locked and a read of their rows, sent
//     in one call (the DSN's multiStatements), so any number of processes
//     claim without taking a job twice.
//   - MariaDB has no notifications: runners in the process that enqueued
//     are woken once its transaction commits; runners in other processes
//     find new jobs, and cancellations, when they poll and renew their
//     leases.
//   - Times are DATETIME(6) in UTC, from the server's clock; JSON is
//     LONGTEXT.
//   - Migrations commit statement by statement (MariaDB commits DDL as it
//     runs it); a named lock keeps processes from migrating at once.
//   - EnqueueBulk streams its jobs with LOAD DATA LOCAL INFILE, in one
//     transaction. A server that refuses local files (local_infile=OFF;
//     MariaDB's default is ON) gets multi-row INSERTs instead, as does a
//     load the server took only in part, so that a job it cannot store
//     fails the call with INSERT's error and stores nothing.
//   - A stop out of time puts back the jobs whose rows another transaction
//     holds by looking for them again (SKIP LOCKED) until its deadline,
//     not by waiting for the row in the server: MariaDB would go on
//     waiting after the client gave up.
//   - A claim that limits (KindLimit, KeyLimit, SetLimit) apply to locks
//     the limits' rows, counts their use and locks its candidates in
//     statements of one transaction, and picks among them in the client;
//     from a cursor it reads the queue from its start, and a fair claim
//     reads every queued job of its fair kinds to find each key's first.
//
// # Throughput
//
// On a machine of 2 CPUs, with MariaDB 10.11's default settings
// (innodb_flush_log_at_trx_commit=1, a 128 MB buffer pool), in a database
// of its own:
//
//	mysql -e 'CREATE DATABASE sheaf_bench'
//	go run ./examples/queuebench -store mysql -dsn mysql://root@127.0.0.1:3306/sheaf_bench -jobs 50000
//
// EnqueueBulk inserts 101,000 to 107,000 jobs/s, and one runner of 100
// workers works 24,700 to 25,100 jobs/s (three runs on an idle 2-core
// Intel Xeon VM). Both rates are bound by the CPU the server gets, not by
// the queue's round trips or its workers: LOAD DATA, which EnqueueBulk
// streams the jobs through, takes the server about 9 µs per row on one
// thread (the client spends under 1 µs a job), most of it entering the
// row into the table's seven secondary indexes (MariaDB has no partial
// indexes, so every row enters each; the same load into the table
// without them takes a third of the time); an UPDATE of a job costs it 20
// to 25 µs per row, most of it rewriting the secondary indexes that hold
// the job's status, and a job is updated twice, claimed and completed.
// Without partial indexes, the table has no index of leases: the rescue
// finds expired leases among the PROCESSING jobs, through the index by
// status.
package mysqldb

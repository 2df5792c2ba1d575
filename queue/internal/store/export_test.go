package store

// MySQLLoads is how many of st's Copy calls LOAD DATA stored, if st is the
// MariaDB store.
func MySQLLoads(st Store) int64 {
	if s, ok := st.(*mysql); ok {
		return s.loads.Load()
	}
	return 0
}

// MigrationLock is the statement that takes the lock Migrate holds on
// PostgreSQL.
const MigrationLock = migrationLock

// SQLiteCopyRows is how many jobs one INSERT of the SQLite store's Copy
// writes.
const SQLiteCopyRows = copyRows

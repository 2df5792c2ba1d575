package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/queuetest"
)

var entry = Entry{ID: 7, Employee: 1049, Day: "2025-12-03", Hours: 6.5, Project: "P-07", SSN: "123-45-6789"}

func TestMaskByRole(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		auth   queue.Auth
		county string
		ssn    string // "" when denied
	}{
		"admin":                   {admin, "Travis", "123-45-6789"},
		"supervisor":              {supervisor, "Bexar", "***-**-6789"},
		"supervisor, from JSON":   {queue.Auth{"role": roleSupervisor, "counties": []any{"Harris", "Dallas"}}, "Dallas", "***-**-6789"},
		"supervisor, not theirs":  {supervisor, "Travis", ""},
		"supervisor, no counties": {queue.Auth{"role": roleSupervisor}, "Travis", ""},
		"case worker":             {caseWorker("Tarrant"), "Tarrant", hiddenSSN},
		"case worker, not theirs": {caseWorker("Tarrant"), "Travis", ""},
		"no role":                 {queue.Auth{"sub": "x"}, "Travis", ""},
		"no claims":               {nil, "Travis", ""},
		"unknown role":            {queue.Auth{"role": "admin"}, "Travis", ""},
	} {
		mask, err := maskFor(c.auth, c.county)
		if c.ssn == "" {
			require.ErrorIs(t, err, errDenied, name)
			continue
		}
		require.NoError(t, err, name)
		got := mask(entry)
		require.Equal(t, c.ssn, got.SSN, name)
		got.SSN = entry.SSN
		require.Equal(t, entry, got, "%s: only the SSN is masked", name)
	}
}

// TestEachFormatOpensMasked writes a report in every format through the
// handler, chunk by chunk, as a supervisor, and reads it back.
func TestEachFormatOpensMasked(t *testing.T) {
	t.Parallel()
	for name := range formats {
		h, job, dir := started(t, name, "Bexar", supervisor)
		// A first chunk again starts the file afresh.
		require.NoError(t, h.ProcessChunk(context.Background(), job, chunkOf(1, entry, entry)), name)
		require.NoError(t, h.ProcessChunk(context.Background(), job, chunkOf(2, entry)), name)
		require.NoError(t, h.Finish(context.Background(), job), name)
		n, _, err := countRecords(filepath.Join(dir, "bexar."+name), name, roleSupervisor)
		require.NoError(t, err, name)
		require.Equal(t, 3, n, name)
		_, _, err = countRecords(filepath.Join(dir, "bexar."+name), name, roleAdmin)
		require.ErrorContains(t, err, `shows SSN "***-**-6789" to a ADMIN`, name)
		require.Empty(t, h.open, name)
	}
}

// TestRefusedReportsFailAtOnce: a requester who may not see a county's
// report fails the job without retries, and writes nothing.
func TestRefusedReportsFailAtOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := &reports{out: dir, say: t.Logf}
	job := queuetest.NewJob(CountyReport{County: "Travis", Format: "csv"})
	job.Auth = caseWorker("Tarrant")
	_, _, err := h.Records(context.Background(), job)
	require.ErrorIs(t, err, errDenied)
	require.True(t, queue.IsPermanent(err))
	err = h.ProcessChunk(context.Background(), job, chunkOf(1, entry))
	require.ErrorIs(t, err, errDenied)
	require.True(t, queue.IsPermanent(err))
	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, files)
}

// TestCleanupClosesAnOpenReport: a cancelled attempt's open file is closed
// and removed; a chunk after the first without an open file is an error.
func TestCleanupClosesAnOpenReport(t *testing.T) {
	t.Parallel()
	for name := range formats {
		h, job, dir := started(t, name, "Harris", admin)
		require.NoError(t, h.Cleanup(context.Background(), job), name)
		files, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Empty(t, files, name)
		err = h.ProcessChunk(context.Background(), job, chunkOf(2, entry))
		require.ErrorContains(t, err, "no open report", name)
		require.False(t, errors.Is(err, errDenied))
	}
}

// chunkOf is chunk seq of a job, of records (offsets as if every chunk had
// two).
func chunkOf(seq int, records ...Entry) batch.Batch[Entry] {
	return batch.Batch[Entry]{Seq: seq, Offset: int64(seq-1) * 2, Items: records}
}

// started returns a handler writing to a new directory, and a job of
// county's report in format, asked for by auth, whose first chunk, of one
// entry, it has processed.
func started(t *testing.T, format, county string, auth queue.Auth) (*reports, *queue.Job[CountyReport], string) {
	t.Helper()
	dir := t.TempDir()
	h := &reports{out: dir, say: t.Logf}
	job := queuetest.NewJob(CountyReport{County: county, Format: format})
	job.Auth = auth
	require.NoError(t, h.ProcessChunk(context.Background(), job, chunkOf(1, entry)), format)
	return h, job, dir
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

func runQueues(ctx context.Context, e *env, args []string) error {
	sub := "list"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	about := map[string]string{
		"list":   "Lists the queues: their jobs by status, how long the oldest due job has waited, whether paused.",
		"pause":  "Pauses a queue in every runner: they claim none of its jobs until it is resumed. Recorded in the audit log.",
		"resume": "Resumes a paused queue. Recorded in the audit log.",
	}[sub]
	if about == "" {
		return usageError("queues: unknown subcommand %q (list, pause, resume)", sub)
	}
	usage := "[flags]"
	if sub != "list" {
		usage = "NAME [flags]"
	}
	fs, dsn := e.flags("queues "+sub, usage, about)
	asJSON := fs.Bool("json", false, "list: print JSON")
	pos, err := e.parse(fs, args)
	if err != nil {
		return err
	}
	if sub == "list" && len(pos) > 0 || sub != "list" && len(pos) != 1 {
		return usageError("queues %s: want %s", sub, strings.TrimSuffix(usage, " [flags]"))
	}
	client, _, closeDB, err := e.open(ctx, *dsn, false, nil)
	if err != nil {
		return err
	}
	defer closeDB()
	if sub != "list" {
		name := pos[0]
		do := client.PauseQueue
		if sub == "resume" {
			do = client.ResumeQueue
		}
		err := do(ctx, name)
		result, changed := "ok", int64(1)
		if err != nil {
			result, changed = err.Error(), 0
		}
		target, _ := json.Marshal(map[string]string{"queue": name})
		if _, aerr := client.RecordAudit(ctx, auditEntry(sub, target, result, changed)); aerr != nil && err == nil {
			err = fmt.Errorf("audit: %w", aerr)
		}
		if err == nil {
			fmt.Fprintf(e.stdout, "queue %s: %sd\n", name, sub)
		}
		return err
	}
	qs, err := client.Queues(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(qs)
	}
	w := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "QUEUE\tPAUSED\tOLDEST DUE\tJOBS")
	for _, q := range qs {
		var counts []string
		for _, s := range sortedStatuses(q.Counts) {
			counts = append(counts, fmt.Sprintf("%s %d", s, q.Counts[s]))
		}
		paused := "no"
		if q.Paused {
			paused = "yes"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", q.Name, paused, q.OldestDue.Round(time.Second), strings.Join(counts, ", "))
	}
	return w.Flush()
}

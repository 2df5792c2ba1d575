// Command abbench compares the benchmarks of two git refs of this module in
// alternating rounds, so that a change in speed can be told from the drift of
// a shared machine.
//
//	go run ./internal/abbench -a 73332cb -b HEAD -rounds 5
//
// It builds each ref's test binary of one package (-pkg, ./queue by
// default) from a copy of the ref (git archive into a temporary directory;
// the ref "." is the working tree as it is, uncommitted changes included),
// then runs the two binaries one after the other in each round, A first in
// odd rounds and B first in even ones, with -test.bench and -test.benchtime
// as given. It prints every round's figures and the ratio B/A of each
// metric, then each metric's medians and the median of the per-round
// ratios with their range. Besides the benchmarks' own metrics it reports
// proc-cpu-s, the CPU time (user and system) of each test binary's whole
// run, read from the operating system, so that refs whose benchmarks do
// not yet report CPU per job can still be compared by it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

func main() {
	var o options
	flag.StringVar(&o.a, "a", "", "the baseline ref (a commit, branch or tag; . for the working tree)")
	flag.StringVar(&o.b, "b", ".", "the ref compared with the baseline")
	flag.StringVar(&o.pkg, "pkg", "./queue", "the package whose benchmarks run")
	flag.StringVar(&o.bench, "bench", "QueueRawClaimComplete|QueueThroughput", "the benchmarks to run, as -test.bench")
	flag.StringVar(&o.benchtime, "benchtime", "100000x", "as -test.benchtime")
	flag.IntVar(&o.rounds, "rounds", 5, "how many rounds; each runs both refs")
	flag.Parse()
	// Interrupted, it stops the running binary and still removes its
	// temporary directory.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := o.run(ctx, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "abbench:", err)
		os.Exit(1)
	}
}

type options struct {
	a, b, pkg, bench, benchtime string
	rounds                      int
}

func (o options) run(ctx context.Context, out io.Writer) error {
	if o.a == "" || o.b == "" || o.rounds < 1 {
		return errors.New("-a and -b name the two refs, and -rounds is at least 1")
	}
	root, err := output(ctx, "", "git", "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "abbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var bins [2]binary
	for i, ref := range []string{o.a, o.b} {
		fmt.Fprintf(out, "building %s of %s\n", o.pkg, ref)
		if bins[i], err = build(ctx, root, ref, filepath.Join(tmp, "ab"[i:i+1]), o.pkg); err != nil {
			return fmt.Errorf("%s: %w", ref, err)
		}
	}
	var rounds [][2]results
	for r := 1; r <= o.rounds; r++ {
		order := []int{0, 1}
		if r%2 == 0 {
			order = []int{1, 0}
		}
		var got [2]results
		for _, i := range order {
			if got[i], err = runBench(ctx, bins[i], o.bench, o.benchtime); err != nil {
				return fmt.Errorf("round %d, %s: %w", r, []string{o.a, o.b}[i], err)
			}
		}
		rounds = append(rounds, got)
		fmt.Fprintf(out, "\nround %d (%s first)\n", r, "AB"[order[0]:order[0]+1])
		printRound(out, got)
	}
	fmt.Fprintf(out, "\nA = %s, B = %s: medians of %d rounds; B/A is the median of the rounds' ratios (range)\n", o.a, o.b, o.rounds)
	printSummary(out, rounds)
	return nil
}

// binary is a built test binary and the package directory it runs in, as
// go test runs it.
type binary struct{ path, dir string }

// build copies ref of the repository at root into dir (or, for ".", uses
// the working tree) and compiles pkg's test binary there.
func build(ctx context.Context, root, ref, dir, pkg string) (binary, error) {
	src := root
	if ref != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return binary{}, err
		}
		archive := exec.CommandContext(ctx, "git", "-C", root, "archive", "--format=tar", ref)
		untar := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
		pipe, err := archive.StdoutPipe()
		if err != nil {
			return binary{}, err
		}
		untar.Stdin = pipe
		var archiveErr, untarErr bytes.Buffer // one each: the two run at once
		archive.Stderr, untar.Stderr = &archiveErr, &untarErr
		if err := untar.Start(); err != nil {
			return binary{}, err
		}
		if err := archive.Run(); err != nil {
			_ = untar.Wait()
			return binary{}, fmt.Errorf("git archive: %w: %s", err, archiveErr.Bytes())
		}
		if err := untar.Wait(); err != nil {
			return binary{}, fmt.Errorf("tar: %w: %s", err, untarErr.Bytes())
		}
		src = dir
	}
	bin := dir + ".test"
	if _, err := output(ctx, src, "go", "test", "-c", "-o", bin, pkg); err != nil {
		return binary{}, err
	}
	return binary{bin, filepath.Join(src, pkg)}, nil
}

// results holds one run's metrics by benchmark and unit.
type results map[string]map[string]float64

// runBench runs a test binary's benchmarks once and parses its figures.
func runBench(ctx context.Context, bin binary, bench, benchtime string) (results, error) {
	cmd := exec.CommandContext(ctx, bin.path, "-test.run", "^$", "-test.bench", bench, "-test.benchtime", benchtime)
	cmd.Dir = bin.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%w\n%s%s", err, stdout.Bytes(), stderr.Bytes())
	}
	res, err := parse(&stdout)
	if err != nil {
		return nil, err
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("no benchmark matched %q\n%s", bench, stdout.Bytes())
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res["(process)"] = map[string]float64{
			"proc-cpu-s": time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds(),
			"wall-s":     time.Since(start).Seconds(),
		}
	}
	return res, nil
}

// parse reads the benchmark lines of go test's output: a name (its
// -GOMAXPROCS suffix dropped), the iterations, then pairs of a value and
// its unit.
func parse(r io.Reader) (results, error) {
	res := results{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // a benchmark's log line, not its result
		}
		name := strings.TrimPrefix(f[0], "Benchmark")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		m := map[string]float64{}
		for i := 2; i < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchmark %s: %q is not a number", name, f[i])
			}
			m[f[i+1]] = v
		}
		res[name] = m
	}
	return res, sc.Err()
}

// row is one metric of one benchmark.
type row struct{ bench, unit string }

// rows lists the metrics both runs reported, in a stable order.
func rows(pair [2]results) []row {
	var out []row
	for name, m := range pair[0] {
		for unit := range m {
			if _, ok := pair[1][name][unit]; ok {
				out = append(out, row{name, unit})
			}
		}
	}
	slices.SortFunc(out, func(x, y row) int { return strings.Compare(x.bench+" "+x.unit, y.bench+" "+y.unit) })
	return out
}

func printRound(out io.Writer, pair [2]results) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, r := range rows(pair) {
		a, b := pair[0][r.bench][r.unit], pair[1][r.bench][r.unit]
		fmt.Fprintf(w, "%s\t%s\tA %s\tB %s\tB/A %s\t\n", r.bench, r.unit, num(a), num(b), ratio(a, b))
	}
	_ = w.Flush()
}

func printSummary(out io.Writer, rounds [][2]results) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "benchmark\tmetric\tA\tB\tB/A\t(range)\t\n")
	for _, r := range rows(rounds[0]) {
		var as, bs, ratios []float64
		for _, pair := range rounds {
			a, okA := pair[0][r.bench][r.unit]
			b, okB := pair[1][r.bench][r.unit]
			if !okA || !okB {
				continue
			}
			as, bs = append(as, a), append(bs, b)
			if a != 0 {
				ratios = append(ratios, b/a)
			}
		}
		rng := "-"
		if len(ratios) > 0 {
			rng = fmt.Sprintf("%.2f to %.2f", slices.Min(ratios), slices.Max(ratios))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t\n", r.bench, r.unit, num(median(as)), num(median(bs)), fmtRatio(median(ratios), len(ratios) > 0), rng)
	}
	_ = w.Flush()
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// num shows four significant digits, without an exponent for large values.
func num(v float64) string {
	if math.Abs(v) >= 1000 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func ratio(a, b float64) string { return fmtRatio(b/a, a != 0) }

func fmtRatio(r float64, ok bool) string {
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.2f", r)
}

// output runs a command in dir and returns its trimmed standard output.
func output(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	return strings.TrimSpace(string(b)), nil
}

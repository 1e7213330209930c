// The order in which the FGD paper's artifact (github.com/hkust-adsl/
// kubernetes-scheduler-simulator, `scripts/generate_config_and_run.py
// --shuffle-pod=true -tune 1.3 -tuneseed SEED`) submits the tasks of an
// openb trace: the tasks sorted by name and shuffled, then copies drawn
// at random from the name-sorted tasks until the GPU they ask reaches the
// tuning ratio of the nodes' GPU capacity. Only the order depends on Go's
// math/rand, so only the order is computed here, with Go's own generator;
// the scheduling is Arbiter's (`examples/openb.rs`).
//
// Usage: go run order.go TASKS.csv NODES.csv RATIO SEED...
// Output, per seed: "seed N", then one line of task indices (into the
// tasks sorted by name; copies repeat an index).
package main

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
)

func read(path string) [][]string {
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
		os.Exit(1)
	}
	return rows
}

func column(header []string, name string) int {
	for i, h := range header {
		if h == name {
			return i
		}
	}
	fmt.Fprintf(os.Stderr, "no column %q\n", name)
	os.Exit(1)
	return -1
}

func atoi(s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		fmt.Fprintf(os.Stderr, "not an integer: %q\n", s)
		os.Exit(1)
	}
	return v
}

func main() {
	if len(os.Args) < 5 {
		fmt.Fprintln(os.Stderr, "usage: go run order.go TASKS.csv NODES.csv RATIO SEED...")
		os.Exit(2)
	}
	tasks := read(os.Args[1])
	header, rows := tasks[0], tasks[1:]
	name, num, milli := column(header, "name"), column(header, "num_gpu"), column(header, "gpu_milli")
	sort.Slice(rows, func(i, j int) bool { return rows[i][name] < rows[j][name] })
	// Per task: GPU milli per GPU (0 for CPU tasks, capped at 1000, as the
	// artifact's pod_csv_to_yaml.py writes it) and the total it asks.
	perGpu := make([]int64, len(rows))
	var requested int64
	for i, r := range rows {
		if n := atoi(r[num]); n > 0 {
			m := atoi(r[milli])
			if m > 1000 {
				m = 1000
			} else if m < 0 {
				m = 0
			}
			perGpu[i] = m
			requested += n * m
		}
	}
	nodes := read(os.Args[2])
	gpus := column(nodes[0], "gpu")
	var capacity int64
	for _, r := range nodes[1:] {
		capacity += atoi(r[gpus]) * 1000
	}
	ratio, err := strconv.ParseFloat(os.Args[3], 64)
	if err != nil {
		fmt.Fprintf(os.Stderr, "RATIO: %v\n", err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for _, arg := range os.Args[4:] {
		seed := atoi(arg)
		r := rand.New(rand.NewSource(seed))
		r.Int() // the artifact logs one draw right after seeding
		n := len(rows)
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		r.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
		// tuneUpPods: its stop test adds one GPU's milli, not the total.
		total := requested
		for {
			idx := r.Intn(n)
			if float64(total+perGpu[idx]) > ratio*float64(capacity) {
				break
			}
			total += perGpu[idx] * atoi(rows[idx][num])
			order = append(order, idx)
		}
		fmt.Fprintf(out, "seed %d\n", seed)
		for i, idx := range order {
			if i > 0 {
				out.WriteByte(' ')
			}
			out.WriteString(strconv.Itoa(idx))
		}
		out.WriteByte('\n')
	}
}

// Command porcupine-check checks a splitbrain/Jepsen-style JSON Lines keyed cas-register
// history with Porcupine (github.com/anishathalye/porcupine), for
// scripts/porcupine-compare.sh: the same file splitbrain checks, side by side.
//
// Input: one op a line, {"process":3,"type":"invoke","f":"cas","key":"k7","value":[1,2],...}
// (the history format of shared/DESIGN.md). Invokes are paired with the next
// completion of the same process. Semantics follow splitbrain's default (Jepsen's):
//   - ok: the op took effect, with that output (a read's value, a cas that succeeded);
//   - fail: the op never took effect and is dropped;
//   - an info or never-completed read constrains nothing and is dropped;
//   - info, or no completion at all: may or may not have taken effect; its return time is
//     +infinity (math.MaxInt64), as Porcupine's docs advise for indeterminate ops, and the
//     model accepts any output for it.
//
// The model is a keyed register with read/write/cas, partitioned by key (Porcupine's
// KV-style model with Partition). Prints one line of JSON: ops, parse and check seconds,
// and the verdict (valid, invalid, or unknown when the timeout ran out).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"reflect"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

const (
	opRead = iota
	opWrite
	opCas
)

// casInput is an op's input: the key (interned), what it does, and its arguments.
type casInput struct {
	key  int
	op   int
	arg1 int // write's value, cas's expected value
	arg2 int // cas's new value
}

// casOutput is an op's output: a read's value (0 = nil), or unknown for info/pending ops.
type casOutput struct {
	value   int
	unknown bool
}

// line is one JSON Lines op, as much of it as the check needs.
type line struct {
	Process json.RawMessage `json:"process"`
	Type    string          `json:"type"`
	F       string          `json:"f"`
	Key     json.RawMessage `json:"key"`
	Value   json.RawMessage `json:"value"`
}

// registerValue reads a register value: null is 0 (the initial nil), else an integer.
func registerValue(raw json.RawMessage) (int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var v int
	err := json.Unmarshal(raw, &v)
	return v, err
}

type pending struct {
	input casInput
	call  int64
}

// parse reads the history into Porcupine operations, with the number of keys.
func parse(path string) ([]porcupine.Operation, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	keys := map[string]int{}
	clients := map[string]int{}
	open := map[string]pending{}
	var ops []porcupine.Operation
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 64<<20)
	// Logical time: the line number, so call and return order is the history's order.
	var t int64
	for scanner.Scan() {
		text := scanner.Bytes()
		if len(text) == 0 {
			continue
		}
		t++
		var l line
		if err := json.Unmarshal(text, &l); err != nil {
			return nil, 0, fmt.Errorf("line %d: %v", t, err)
		}
		proc := string(l.Process)
		if proc == `"nemesis"` || len(l.Key) == 0 {
			continue
		}
		switch l.Type {
		case "invoke":
			key := string(l.Key)
			k, ok := keys[key]
			if !ok {
				k = len(keys)
				keys[key] = k
			}
			in := casInput{key: k}
			switch l.F {
			case "read":
				in.op = opRead
			case "write":
				in.op = opWrite
				if in.arg1, err = registerValue(l.Value); err != nil {
					return nil, 0, fmt.Errorf("line %d: write value: %v", t, err)
				}
			case "cas":
				in.op = opCas
				var pair [2]int
				if err := json.Unmarshal(l.Value, &pair); err != nil {
					return nil, 0, fmt.Errorf("line %d: cas value: %v", t, err)
				}
				in.arg1, in.arg2 = pair[0], pair[1]
			default:
				return nil, 0, fmt.Errorf("line %d: unknown f %q", t, l.F)
			}
			open[proc] = pending{in, t}
		case "ok", "fail", "info":
			p, ok := open[proc]
			if !ok {
				return nil, 0, fmt.Errorf("line %d: completion without invoke", t)
			}
			delete(open, proc)
			// A fail never happened; an info read constrains nothing (splitbrain drops both).
			if l.Type == "fail" || (l.Type == "info" && p.input.op == opRead) {
				continue
			}
			client, ok := clients[proc]
			if !ok {
				client = len(clients)
				clients[proc] = client
			}
			op := porcupine.Operation{ClientId: client, Input: p.input, Call: p.call}
			if l.Type == "info" {
				op.Output = casOutput{unknown: true}
				op.Return = math.MaxInt64
			} else {
				out := casOutput{}
				if p.input.op == opRead {
					if out.value, err = registerValue(l.Value); err != nil {
						return nil, 0, fmt.Errorf("line %d: read value: %v", t, err)
					}
				}
				op.Output = out
				op.Return = t
			}
			ops = append(ops, op)
		default:
			return nil, 0, fmt.Errorf("line %d: unknown type %q", t, l.Type)
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, 0, err
	}
	ops = appendPending(ops, open, clients)
	return ops, len(keys), nil
}

// porcupineOp is Porcupine's operation type.
type porcupineOp = porcupine.Operation

// appendPending appends the ops never completed, in call order: indeterminate, like info
// (reads dropped, as above).
func appendPending(ops []porcupineOp, open map[string]pending, clients map[string]int) []porcupineOp {
	procs := make([]string, 0, len(open))
	for proc := range open {
		procs = append(procs, proc)
	}
	sort.Slice(procs, func(i, j int) bool { return open[procs[i]].call < open[procs[j]].call })
	for _, proc := range procs {
		p := open[proc]
		if p.input.op == opRead {
			continue
		}
		client, ok := clients[proc]
		if !ok {
			client = len(clients)
			clients[proc] = client
		}
		ops = append(ops, porcupine.Operation{
			ClientId: client, Input: p.input, Call: p.call,
			Output: casOutput{unknown: true}, Return: math.MaxInt64,
		})
	}
	return ops
}

// keyedCasModel is a register per key; Partition splits the history by key.
func keyedCasModel(keys int) porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			parts := make([][]porcupine.Operation, keys)
			for _, op := range history {
				k := op.Input.(casInput).key
				parts[k] = append(parts[k], op)
			}
			out := parts[:0]
			for _, p := range parts {
				if len(p) > 0 {
					out = append(out, p)
				}
			}
			return out
		},
		Init: func() interface{} { return 0 },
		Step: func(state, input, output interface{}) (bool, interface{}) {
			reg := state.(int)
			in := input.(casInput)
			out := output.(casOutput)
			switch in.op {
			case opRead:
				return out.unknown || out.value == reg, reg
			case opWrite:
				return true, in.arg1
			default:
				// An ok cas succeeded; an indeterminate one took effect if it could (if
				// it did not, it linearizes after every other op, return time +infinity).
				if reg == in.arg1 {
					return true, in.arg2
				}
				return out.unknown, reg
			}
		},
		Equal: func(a, b interface{}) bool { return a.(int) == b.(int) },
		DescribeOperation: func(input, output interface{}) string {
			return fmt.Sprintf("%v -> %v", input, output)
		},
		DescribeState: func(state interface{}) string { return fmt.Sprint(state) },
	}
}

func main() {
	timeout := flag.Duration("timeout", 0, "give up after this long (0: no limit); the verdict is then unknown")
	reader := flag.String("reader", "fast", "the history reader (both ours): fast (parallel scanner, reader.go) or json (encoding/json, line by line)")
	verify := flag.Bool("verify-reader", false, "read the history with both readers, exit 3 if their operations differ, and print nothing else")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: porcupine-check [--timeout 10m] [--reader fast|json] [--verify-reader] HISTORY.jsonl")
		os.Exit(2)
	}
	read := map[string]func(string) ([]porcupineOp, int, error){"fast": parseFast, "json": parse}[*reader]
	if read == nil {
		fmt.Fprintf(os.Stderr, "unknown --reader %q (fast or json)\n", *reader)
		os.Exit(2)
	}
	if *verify {
		os.Exit(verifyReaders(flag.Arg(0)))
	}
	started := time.Now()
	ops, keys, err := read(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	parseS := time.Since(started).Seconds()
	started = time.Now()
	res := porcupine.CheckOperationsTimeout(keyedCasModel(keys), ops, *timeout)
	checkS := time.Since(started).Seconds()
	verdict := map[porcupine.CheckResult]string{
		porcupine.Ok:      "valid",
		porcupine.Illegal: "invalid",
		porcupine.Unknown: "unknown",
	}[res]
	out, _ := json.Marshal(map[string]interface{}{
		"checker": "porcupine",
		"reader":  *reader,
		"ops":     len(ops),
		"keys":    keys,
		"parse_s": math.Round(parseS*1000) / 1000,
		"check_s": math.Round(checkS*1000) / 1000,
		"total_s": math.Round((parseS+checkS)*1000) / 1000,
		"verdict": verdict,
	})
	fmt.Println(string(out))
	if verdict != "valid" {
		os.Exit(1)
	}
}

// verifyReaders reads path with both readers: 0 if they build the same operations and
// key count, 3 if not, 2 if either fails.
func verifyReaders(path string) int {
	a, ka, err := parse(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "json reader:", err)
		return 2
	}
	b, kb, err := parseFast(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fast reader:", err)
		return 2
	}
	if ka != kb || !reflect.DeepEqual(a, b) {
		fmt.Fprintf(os.Stderr, "readers differ: json %d ops %d keys, fast %d ops %d keys\n", len(a), ka, len(b), kb)
		return 3
	}
	fmt.Fprintf(os.Stderr, "readers agree: %d ops, %d keys\n", len(a), ka)
	return 0
}

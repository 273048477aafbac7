// The fast reader (ours, like the encoding/json one in main.go: Porcupine ships no
// reader for Jepsen-style histories). The whole file is read at once and cut into one
// chunk per CPU at line boundaries; each chunk's lines are scanned in their own goroutine
// by a small JSON scanner that walks the object's top-level members, keeps the five this
// check needs (process, type, f, key, value) and skips the others without decoding them.
// A single pass then pairs invokes with completions in file order, as parse does. Lines
// the scanner does not understand (escapes in a kept string, a number it cannot read)
// are decoded with encoding/json instead, so both readers accept the same files; the
// --verify-reader flag checks that they build the same operations.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
)

const (
	typeInvoke = iota
	typeOk
	typeFail
	typeInfo
)

// record is one line, scanned: byte ranges into the file for the process and key (the
// key is interned by the pairing pass, in file order, as parse does), the rest decoded.
type record struct {
	procStart, procEnd int // raw JSON of "process"
	keyStart, keyEnd   int // raw JSON of "key"; keyEnd == keyStart when absent
	typ                int8
	f                  int8 // opRead, opWrite, opCas; -1 when not one of them
	hasKey             bool
	nemesis            bool
	// "value": a register value (null is 0) or a cas pair.
	v1, v2 int
	vKind  int8 // 0 absent or null, 1 integer, 2 pair, 3 something else
	empty  bool // a blank line
}

var errSlow = errors.New("not understood by the fast scanner")

// skipSpace returns the index of the first non-blank byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i] == '"', and whether
// it holds an escape.
func skipString(b []byte, i int) (int, bool, error) {
	escaped := false
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped, nil
		}
	}
	return 0, false, errSlow
}

// skipValue returns the index just past the JSON value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errSlow
	}
	switch b[i] {
	case '"':
		j, _, err := skipString(b, i)
		return j, err
	case '{', '[':
		depth := 0
		// Bounded by the line's length: every iteration moves j forward.
		for j := i; j < len(b); {
			switch b[j] {
			case '"':
				k, _, err := skipString(b, j)
				if err != nil {
					return 0, err
				}
				j = k
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
			j++
		}
		return 0, errSlow
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' {
			j++
		}
		return j, nil
	}
}

// scanInt reads an integer (no fraction, no exponent) that fills b exactly.
func scanInt(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, false
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	v := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

// scanValue decodes the "value" member: null, an integer or a pair of integers.
func scanValue(raw []byte, r *record) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		r.vKind = 0
		return
	}
	if v, ok := scanInt(raw); ok {
		r.v1, r.vKind = v, 1
		return
	}
	if raw[0] == '[' && raw[len(raw)-1] == ']' {
		if comma := bytes.IndexByte(raw, ','); comma > 0 {
			a, ok1 := scanInt(bytes.TrimSpace(raw[1:comma]))
			b, ok2 := scanInt(bytes.TrimSpace(raw[comma+1 : len(raw)-1]))
			if ok1 && ok2 {
				r.v1, r.v2, r.vKind = a, b, 2
				return
			}
		}
	}
	r.vKind = 3
}

// scanLine fills r from one line, line[start:end] of the file buf.
func scanLine(buf []byte, start, end int, r *record) error {
	b := buf[:end]
	i := skipSpace(b, start)
	if i == end {
		r.empty = true
		return nil
	}
	if b[i] != '{' {
		return errSlow
	}
	i = skipSpace(b, i+1)
	r.f = -1
	typ := -1
	// Bounded by the line: every member moves i past its value.
	for i < end && b[i] != '}' {
		if b[i] != '"' {
			return errSlow
		}
		nameEnd, esc, err := skipString(b, i)
		if err != nil || esc {
			return errSlow
		}
		name := b[i+1 : nameEnd-1]
		i = skipSpace(b, nameEnd)
		if i >= end || b[i] != ':' {
			return errSlow
		}
		i = skipSpace(b, i+1)
		vEnd, err := skipValue(b, i)
		if err != nil {
			return err
		}
		val := b[i:vEnd]
		switch string(name) {
		case "process":
			r.procStart, r.procEnd = i, vEnd
			r.nemesis = string(val) == `"nemesis"`
		case "type":
			switch string(val) {
			case `"invoke"`:
				typ = typeInvoke
			case `"ok"`:
				typ = typeOk
			case `"fail"`:
				typ = typeFail
			case `"info"`:
				typ = typeInfo
			default:
				return errSlow
			}
		case "f":
			switch string(val) {
			case `"read"`:
				r.f = opRead
			case `"write"`:
				r.f = opWrite
			case `"cas"`:
				r.f = opCas
			}
		case "key":
			if val[0] == '"' {
				if _, esc, _ := skipString(val, 0); esc {
					return errSlow
				}
			}
			r.keyStart, r.keyEnd, r.hasKey = i, vEnd, true
		case "value":
			scanValue(val, r)
		}
		i = skipSpace(b, vEnd)
		if i < end && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	if typ < 0 {
		return errSlow
	}
	r.typ = int8(typ)
	return nil
}

// slowLine fills r from one line with encoding/json, for what scanLine gives up on. The
// process and key are re-encoded compactly into extra, which the ranges then point into.
func slowLine(text []byte, extra *[]byte, r *record) error {
	var l line
	if err := json.Unmarshal(text, &l); err != nil {
		return err
	}
	*r = record{f: -1}
	put := func(raw json.RawMessage) (int, int) {
		var c bytes.Buffer
		if len(raw) > 0 {
			_ = json.Compact(&c, raw)
		}
		s := len(*extra)
		*extra = append(*extra, c.Bytes()...)
		return s, len(*extra)
	}
	r.procStart, r.procEnd = put(l.Process)
	r.nemesis = string(l.Process) == `"nemesis"`
	if len(l.Key) > 0 {
		r.keyStart, r.keyEnd = put(l.Key)
		r.hasKey = true
	}
	switch l.Type {
	case "invoke":
		r.typ = typeInvoke
	case "ok":
		r.typ = typeOk
	case "fail":
		r.typ = typeFail
	case "info":
		r.typ = typeInfo
	default:
		return fmt.Errorf("unknown type %q", l.Type)
	}
	switch l.F {
	case "read":
		r.f = opRead
	case "write":
		r.f = opWrite
	case "cas":
		r.f = opCas
	}
	var c bytes.Buffer
	if len(l.Value) > 0 {
		_ = json.Compact(&c, l.Value)
	}
	scanValue(c.Bytes(), r)
	return nil
}

// chunk is one goroutine's share: its records, and the bytes the slow path re-encoded.
type chunk struct {
	recs  []record
	extra []byte
	slow  []bool // per record: ranges point into extra, not the file
	err   error
	line  int // first failing line within the chunk
}

func scanChunk(buf []byte, start, end int) chunk {
	var c chunk
	// Sized for lines of 48 bytes or more (splitbrain's are about 95), so the slices
	// are not regrown and copied as they fill.
	c.recs = make([]record, 0, (end-start)/48+16)
	c.slow = make([]bool, 0, cap(c.recs))
	// Bounded by the chunk: every line moves start past its newline.
	for start < end {
		nl := bytes.IndexByte(buf[start:end], '\n')
		lineEnd := end
		if nl >= 0 {
			lineEnd = start + nl
		}
		// Scanned in place (a record is ~60 bytes: no copy per line).
		c.recs = append(c.recs, record{})
		r := &c.recs[len(c.recs)-1]
		slow := false
		if err := scanLine(buf, start, lineEnd, r); err != nil {
			slow = true
			if err := slowLine(buf[start:lineEnd], &c.extra, r); err != nil {
				c.err, c.line = err, len(c.recs)
				return c
			}
		}
		if r.empty {
			c.recs = c.recs[:len(c.recs)-1]
		} else {
			c.slow = append(c.slow, slow)
		}
		start = lineEnd + 1
	}
	return c
}

// parseFast reads the history like parse, with the parallel scanner.
func parseFast(path string) ([]porcupineOp, int, error) {
	buf, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	n := runtime.GOMAXPROCS(0)
	bounds := []int{0}
	for k := 1; k < n; k++ {
		at := len(buf) * k / n
		if at <= bounds[len(bounds)-1] {
			continue
		}
		nl := bytes.IndexByte(buf[at:], '\n')
		if nl < 0 {
			break
		}
		bounds = append(bounds, at+nl+1)
	}
	bounds = append(bounds, len(buf))
	chunks := make([]chunk, len(bounds)-1)
	var wg sync.WaitGroup
	for k := range chunks {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			chunks[k] = scanChunk(buf, bounds[k], bounds[k+1])
		}(k)
	}
	wg.Wait()
	return pair(buf, chunks)
}

// pair pairs invokes with completions in file order (the sequential part, as in parse).
func pair(buf []byte, chunks []chunk) ([]porcupineOp, int, error) {
	keys := map[string]int{}
	clients := map[string]int{}
	open := map[string]pending{}
	var ops []porcupineOp
	var t int64
	for _, c := range chunks {
		if c.err != nil {
			return nil, 0, fmt.Errorf("line %d: %v", t+int64(c.line), c.err)
		}
		ops = growOps(ops, len(c.recs)/2)
		for j := range c.recs {
			r := &c.recs[j]
			t++
			src := buf
			if c.slow[j] {
				src = c.extra
			}
			if r.nemesis || !r.hasKey {
				continue
			}
			proc := src[r.procStart:r.procEnd]
			switch r.typ {
			case typeInvoke:
				key := src[r.keyStart:r.keyEnd]
				k, ok := keys[string(key)]
				if !ok {
					k = len(keys)
					keys[string(key)] = k
				}
				in := casInput{key: k}
				switch r.f {
				case opRead:
					in.op = opRead
				case opWrite:
					in.op = opWrite
					if r.vKind > 1 {
						return nil, 0, fmt.Errorf("line %d: write value not an integer", t)
					}
					in.arg1 = r.v1
				case opCas:
					in.op = opCas
					if r.vKind != 2 {
						return nil, 0, fmt.Errorf("line %d: cas value not a pair", t)
					}
					in.arg1, in.arg2 = r.v1, r.v2
				default:
					return nil, 0, fmt.Errorf("line %d: unknown f", t)
				}
				open[string(proc)] = pending{in, t}
			default:
				p, ok := open[string(proc)]
				if !ok {
					return nil, 0, fmt.Errorf("line %d: completion without invoke", t)
				}
				delete(open, string(proc))
				if r.typ == typeFail || (r.typ == typeInfo && p.input.op == opRead) {
					continue
				}
				client, ok := clients[string(proc)]
				if !ok {
					client = len(clients)
					clients[string(proc)] = client
				}
				op := porcupineOp{ClientId: client, Input: p.input, Call: p.call}
				if r.typ == typeInfo {
					op.Output = casOutput{unknown: true}
					op.Return = math.MaxInt64
				} else {
					out := casOutput{}
					if p.input.op == opRead {
						if r.vKind > 1 {
							return nil, 0, fmt.Errorf("line %d: read value not an integer", t)
						}
						out.value = r.v1
					}
					op.Output = out
					op.Return = t
				}
				ops = append(ops, op)
			}
		}
	}
	ops = appendPending(ops, open, clients)
	return ops, len(keys), nil
}

// growOps makes room for about extra more ops without a copy per doubling.
func growOps(ops []porcupineOp, extra int) []porcupineOp {
	if cap(ops)-len(ops) >= extra {
		return ops
	}
	grown := make([]porcupineOp, len(ops), len(ops)+extra+extra/4)
	copy(grown, ops)
	return grown
}

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/testenv"
)

// module assembles a WebAssembly module from sections (id, body).
func module(secs ...[]byte) []byte {
	b := append([]byte(nil), header...)
	for _, s := range secs {
		b = append(b, s[0])
		b = appendUleb(b, uint64(len(s)-1))
		b = append(b, s[1:]...)
	}
	return b
}

func sec(id byte, body ...byte) []byte { return append([]byte{id}, body...) }

// dataSec is a data section of active segments at the given offsets.
func dataSec(segs ...segment) []byte {
	return sec(sectionData, encodeData(segs)...)
}

func sameRuns(a, b []segment) bool {
	return slices.EqualFunc(a, b, func(x, y segment) bool { return x.off == y.off && bytes.Equal(x.data, y.data) })
}

func seg(off uint32, data string) segment { return segment{off: off, data: []byte(data)} }

func TestPackMergesAndKeepsTheImage(t *testing.T) {
	custom := sec(0, 4, 'n', 'a', 'm', 'e', 1, 2, 3)
	memory := sec(5, 1, 0, 2) // one memory, min 2 pages
	in := module(custom, memory, dataSec(
		seg(100, "ab"),   // 100..102
		seg(105, "cd"),   // 3 zeros after the first: merged
		seg(300, "ef"),   // 193 zeros: a segment of its own with gap 64
		seg(20, "first"), // out of order: sorted first
		seg(302, "g"),    // adjacent: merged
	), sec(0, 1, 'x'))
	out, st, err := Pack(in, 64)
	if err != nil {
		t.Fatal(err)
	}
	if st.SegmentsBefore != 5 || st.SegmentsAfter != 3 || st.BytesBefore != len(in) || st.BytesAfter != len(out) {
		t.Errorf("stats = %+v", st)
	}
	want := module(custom, memory, dataSec(
		seg(20, "first"), seg(100, "ab\x00\x00\x00cd"), seg(300, "efg"),
	), sec(0, 1, 'x'))
	if !bytes.Equal(out, want) {
		t.Errorf("Pack =\n%x\nwant\n%x", out, want)
	}
	if err := sameImage(in, out); err != nil {
		t.Error(err)
	}
	runs, err := nonZero(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := []segment{seg(20, "first"), seg(100, "ab"), seg(105, "cd"), seg(300, "efg")}; !sameRuns(runs, want) {
		t.Errorf("non-zero runs = %v, want %v", runs, want)
	}
	// sameImage sees a byte that differs, one written only by one module,
	// and one moved.
	for _, other := range [][]byte{
		module(dataSec(seg(20, "first"), seg(100, "ab\x00\x00\x00cx"), seg(300, "efg"))),
		module(dataSec(seg(20, "first"), seg(100, "ab\x00\x00\x01cd"), seg(300, "efg"))),
		module(dataSec(seg(20, "first"), seg(100, "ab\x00\x00\x00cd"), seg(301, "efg"))),
		module(dataSec(seg(20, "first"), seg(100, "ab\x00\x00\x00cd"))),
	} {
		if err := sameImage(in, other); err == nil {
			t.Errorf("sameImage(in, %x) = nil, want a difference", other)
		}
	}

	// Gap 0 joins only adjacent segments; a large gap joins all.
	if _, st, err := Pack(in, 0); err != nil || st.SegmentsAfter != 4 {
		t.Errorf("gap 0: %d segments, %v; want 4", st.SegmentsAfter, err)
	}
	if _, st, err := Pack(in, 1<<20); err != nil || st.SegmentsAfter != 1 {
		t.Errorf("gap 1 MiB: %d segments, %v; want 1", st.SegmentsAfter, err)
	}
	// Pack must not write into its input.
	if again, _, err := Pack(in, 64); err != nil || !bytes.Equal(again, out) {
		t.Errorf("second Pack of the same input differs: %v", err)
	}
}

func TestPackModuleWithoutData(t *testing.T) {
	in := module(sec(5, 1, 0, 1))
	out, st, err := Pack(in, 64)
	if err != nil || !bytes.Equal(out, in) || st.SegmentsBefore != 0 {
		t.Errorf("Pack = %x, %+v, %v; want the module unchanged", out, st, err)
	}
}

func TestPackRefuses(t *testing.T) {
	segs := func(body ...byte) []byte { return module(sec(sectionData, body...)) }
	for _, tc := range []struct {
		name string
		mod  []byte
		err  error
		msg  string
	}{
		{"empty", nil, ErrNotWasm, ""},
		{"wrong version", []byte{0, 'a', 's', 'm', 2, 0, 0, 0}, ErrNotWasm, ""},
		{"section past the end", append(append([]byte(nil), header...), 1, 10, 0), ErrMalformed, "runs past the end"},
		{"section size too large", append(append([]byte(nil), header...), 1, 0xff, 0xff, 0xff, 0xff, 0x7f), ErrMalformed, "too large"},
		{"two data sections", module(dataSec(seg(0, "a")), dataSec(seg(8, "b"))), ErrMalformed, "second data section"},
		{"passive segment", segs(1, 1, 1, 'a'), ErrUnsupported, "kind 1"},
		{"second memory", segs(1, 2, 1, 0x41, 0, 0x0b, 1, 'a'), ErrUnsupported, "memory 1"},
		{"global offset", segs(1, 0, 0x23, 0, 0x0b, 1, 'a'), ErrUnsupported, "not i32.const"},
		{"longer offset expression", segs(1, 0, 0x41, 0, 0x41, 0x0b, 1, 'a'), ErrUnsupported, "more than i32.const"},
		{"overlap", module(dataSec(seg(0, "abcd"), seg(2, "x"))), ErrUnsupported, "overlap"},
		{"data count section", module(sec(sectionDataCount, 1), dataSec(seg(0, "a"))), ErrUnsupported, "data count"},
		{"segment past the section", segs(1, 0, 0x41, 0, 0x0b, 5, 'a'), ErrMalformed, "run past the section"},
		{"too many segments", segs(9, 0), ErrMalformed, "9 segments"},
		{"bytes after the segments", segs(1, 0, 0x41, 0, 0x0b, 1, 'a', 'b'), ErrMalformed, "after the last segment"},
		{"truncated segment", segs(1, 0, 0x41), ErrMalformed, "unexpected end"},
		{"offset too large", segs(1, 0, 0x41, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x0b, 1, 'a'), ErrMalformed, "too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Pack(tc.mod, 64)
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Pack: %v; want %v containing %q", err, tc.err, tc.msg)
			}
			// The image of a module with a data count section is
			// well-defined: Pack refuses it for its code's sake.
			if _, err := nonZero(tc.mod); err == nil && tc.msg != "data count" {
				t.Errorf("nonZero of a refused module: no error")
			}
		})
	}
}

func TestLEB(t *testing.T) {
	for _, v := range []int64{0, 1, 63, 64, -1, -64, -65, 1<<31 - 1, -1 << 31, 123456} {
		r := reader{b: appendSleb(nil, v)}
		if got := r.sleb(32); r.err != nil || got != v || r.pos != len(r.b) {
			t.Errorf("sleb(%d) = %d, %v", v, got, r.err)
		}
	}
	for _, v := range []uint64{0, 127, 128, 1<<32 - 1} {
		r := reader{b: appendUleb(nil, v)}
		if got := r.uleb(32); r.err != nil || got != v || r.pos != len(r.b) {
			t.Errorf("uleb(%d) = %d, %v", v, got, r.err)
		}
	}
	r := reader{b: appendUleb(nil, 1<<32)}
	if r.uleb(32); !errors.Is(r.err, ErrMalformed) {
		t.Errorf("uleb(2^32) in 32 bits: %v, want ErrMalformed", r.err)
	}
	r = reader{b: appendSleb(nil, 1<<31)}
	if r.sleb(32); !errors.Is(r.err, ErrMalformed) {
		t.Errorf("sleb(2^31) in 32 bits: %v, want ErrMalformed", r.err)
	}
}

func FuzzPack(f *testing.F) {
	f.Add(module(dataSec(seg(0, "ab"), seg(10, "cd"), seg(4, "x"))), 4)
	f.Add(module(sec(5, 1, 0, 1), sec(sectionDataCount, 1), dataSec(seg(1<<20, "abc"))), 0)
	f.Fuzz(func(t *testing.T, mod []byte, gap int) {
		gap = max(gap, 0) % (1 << 16)
		out, st, err := Pack(mod, gap)
		if err != nil {
			return
		}
		if err := sameImage(mod, out); err != nil {
			t.Fatal(err)
		}
		if st.SegmentsAfter > st.SegmentsBefore {
			t.Fatalf("%d segments became %d", st.SegmentsBefore, st.SegmentsAfter)
		}
		again, st2, err := Pack(out, gap)
		if err != nil || !bytes.Equal(again, out) || st2.SegmentsAfter != st.SegmentsAfter {
			t.Fatalf("packing a packed module changed it: %v", err)
		}
	})
}

// TestPackedGoProgramRuns packs a real Go js/wasm program and runs both
// builds under Node: they print the same thing, and the packed module has
// a small fraction of the segments.
func TestPackedGoProgramRuns(t *testing.T) {
	node, err := exec.LookPath("node")
	testenv.Require(t, err)
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}
	wasm := filepath.Join(dir, "p.wasm")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", wasm, src)
	build.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	shim := filepath.Join(runtime.GOROOT(), "lib", "wasm", "wasm_exec_node.js")
	runNode := func(p string) string {
		t.Helper()
		b, err := exec.Command(node, shim, p).CombinedOutput()
		if err != nil {
			t.Fatalf("node %s: %v\n%s", p, err, b)
		}
		return string(b)
	}
	want := runNode(wasm)
	orig, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	if err := run([]string{wasm}, &log); err != nil {
		t.Fatal(err)
	}
	packed, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	_, before, _ := Pack(orig, defaultGap)
	if before.SegmentsBefore < 1000 || before.SegmentsAfter > 10 {
		t.Errorf("segments %d → %d; want the Go linker's thousands packed into a few", before.SegmentsBefore, before.SegmentsAfter)
	}
	if bytes.Equal(orig, packed) || !strings.Contains(log.String(), "data segments") {
		t.Errorf("the file was not rewritten (log %q)", log.String())
	}
	if got := runNode(wasm); got != want || !strings.Contains(got, "sum 499500") {
		t.Errorf("packed program printed %q, the original %q", got, want)
	}
}

// program uses initialized data of several kinds (strings, tables, maps
// built from composite literals, reflection, fmt's type information).
const program = `package main

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
)

var table = map[string][]int{"a": {1, 2, 3}, "b": {4, 5}, "c": nil}

type point struct{ X, Y int; Name string }

func main() {
	keys := make([]string, 0, len(table))
	for k := range table {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := 0
	for i := range 1000 {
		s += i
	}
	fmt.Printf("%v %v sum %d %+v %s %t\n", keys, table["a"], s, point{1, 2, "p"},
		strings.ToUpper("données"), unicode.IsUpper('É'))
}
`

func TestRunErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.wasm")
	if err := os.WriteFile(bad, []byte("not wasm"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{nil, "usage"},
		{[]string{"-gap", "-1", bad}, "-gap"},
		{[]string{filepath.Join(dir, "missing.wasm")}, "no such file"},
		{[]string{bad}, ErrNotWasm.Error()},
	} {
		var log strings.Builder
		if err := run(tc.args, &log); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("run(%q) = %v, want an error containing %q", tc.args, err, tc.msg)
		}
	}
	if b, _ := os.ReadFile(bad); string(b) != "not wasm" {
		t.Errorf("a refused file was changed: %q", b)
	}
}

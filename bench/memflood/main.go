// Command memflood measures what a flood of made-up identities costs the
// local server's memory: it builds the pre-filter as `serve --store memory`
// does (httpapi.Handler on two memory stores bounded at -max-identities,
// a no-op origin), calls it directly with -n requests each carrying a
// made-up API key from a made-up IPv4 address, at a fixed clock so that
// nothing expires, then reports the live heap after a collection, the
// process's peak RSS and what the collector took. No socket is opened.
//
//	go build -o /tmp/memflood ./memflood && /tmp/memflood
//	GOMEMLIMIT=700MiB /tmp/memflood
//
// The README's figures for the local server come from it; run each setting
// in a fresh process, as the peak RSS (VmHWM) is the process's.
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/kvstore/memstore"
)

func main() {
	n := flag.Int("n", 1_100_000, "requests, each a new key from a new address (at most 10,000,000)")
	maxIDs := flag.Int("max-identities", 1_000_000, "bound of each memory store, as serve's flag")
	cfgPath := flag.String("config", "../examples/config.json", "configuration file")
	flag.Parse()
	if *n < 1 || *n > 10_000_000 {
		fail(fmt.Errorf("-n %d: must be 1 to 10,000,000", *n))
	}
	data, err := os.ReadFile(*cfgPath)
	if err != nil {
		fail(err)
	}
	cfg, err := config.Parse(data)
	if err != nil {
		fail(fmt.Errorf("%s: %w", *cfgPath, err))
	}
	store, local := memstore.NewLimited(*maxIDs), memstore.NewLimited(*maxIDs)
	now := time.Unix(1_800_000_000, 0)
	h, err := httpapi.New(httpapi.Options{
		Config: cfg, Store: store, Local: local,
		Next:   http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
		Now:    func() time.Time { return now },
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		fail(err)
	}

	runtime.GC()
	base := heap()
	cpu0 := cpu()
	start := time.Now()
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < *n; i += workers {
				h.ServeHTTP(httptest.NewRecorder(), request(i))
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	cpu1 := cpu()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)

	mb := func(b uint64) string { return strconv.FormatUint((b+500_000)/1_000_000, 10) + " MB" }
	gc, all := cpu1.gc-cpu0.gc, cpu1.busy()-cpu0.busy()
	fmt.Printf("GOMEMLIMIT %s GOGC %s GOMAXPROCS %d\n", limit(), orOff(os.Getenv("GOGC")), workers)
	fmt.Printf("requests %d in %v; identities: store %d, local %d; evicted %d, %d\n",
		*n, wall.Round(time.Millisecond), store.Len(), local.Len(), store.Evicted(), local.Evicted())
	fmt.Printf("live heap %s (%s over the empty handler), HeapInuse %s, HeapSys %s, Sys %s\n",
		mb(ms.HeapAlloc), mb(ms.HeapAlloc-base), mb(ms.HeapInuse), mb(ms.HeapSys), mb(ms.Sys))
	fmt.Printf("RSS %s, peak RSS (VmHWM) %s\n", mb(status("VmRSS")), mb(status("VmHWM")))
	fmt.Printf("GC cycles %d during the flood; GC CPU %.2fs of %.2fs busy CPU (%.0f %%)\n",
		cpu1.cycles-cpu0.cycles, gc, all, 100*gc/all)
	runtime.KeepAlive(h)
}

// request is the i-th made-up client: a key no api_keys entry has (the
// default plan, minute and day) from an address no other request has.
func request(i int) *http.Request {
	r := httptest.NewRequest("GET", "/v1/items", nil)
	a := uint32(i) * 0x9e3779b1 // odd: distinct for every i below 2^32
	r.RemoteAddr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), 40000).String()
	r.Header.Set("X-API-Key", fmt.Sprintf("made-up-%016x", uint64(i)*0x9e3779b97f4a7c15))
	return r
}

type cpuStats struct {
	gc, user, scav float64
	cycles         uint64
}

func (c cpuStats) busy() float64 { return c.gc + c.user + c.scav }

func cpu() cpuStats {
	s := []metrics.Sample{
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/cpu/classes/user:cpu-seconds"},
		{Name: "/cpu/classes/scavenge/total:cpu-seconds"},
		{Name: "/gc/cycles/total:gc-cycles"},
	}
	metrics.Read(s)
	return cpuStats{s[0].Value.Float64(), s[1].Value.Float64(), s[2].Value.Float64(), s[3].Value.Uint64()}
}

func heap() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// status returns a field of /proc/self/status in bytes (0 if absent).
func status(field string) uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func limit() string {
	l := debug.SetMemoryLimit(-1)
	if l == 1<<63-1 {
		return "off"
	}
	return strconv.FormatInt(l>>20, 10) + "MiB"
}

func orOff(s string) string {
	if s == "" {
		return "100 (default)"
	}
	return s
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "memflood:", err)
	os.Exit(2)
}

//go:build !(js && wasm)

package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/edge/internal/workerd"
	"github.com/slidegate/slidegate/internal/testenv"
)

// The measurements of docs/edge.md, in workerd under wrangler dev:
//
//	go test -run '^$' -bench Workerd -benchtime 400x ./edge
//
// BenchmarkWorkerdLatency alternates the same check request to a stock
// syumai hello-world Worker (edge/testdata/baseline) and to slidegate's
// check API, one at a time, with a GET to each, and reports the p50s. BenchmarkWorkerdSteadyLoad sends 20 check
// requests a second (open loop) on one key for 10 s to the debug Worker and
// reports KV operations per request and per second and the Go instance's
// memory.

var bench struct {
	once                sync.Once
	err                 error
	baseline, slidegate *workerd.Worker
}

// latencyConfig admits everything: the benchmark measures the decision, not
// a denial.
const latencyConfig = `{"plans": {"free": {"limits": [{"name": "minute", "limit": 100000000, "window": "1m"}, {"name": "day", "limit": 100000000, "window": "24h"}]}},
  "default_plan": "free", "ip_limits": [{"name": "ip-second", "limit": 100000, "window": "1s", "scope": "local"}], "store_timeout": "10s"}`

func benchWorkers(b *testing.B) (baseline, sg *workerd.Worker) {
	b.Helper()
	root, err := testenv.Root()
	if err != nil {
		b.Fatal(err)
	}
	wrangler, err := workerd.Wrangler()
	testenv.Require(b, err)
	bench.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		start := func(pkg string, pack bool, cfg workerd.Config) (*workerd.Worker, error) {
			dir, err := os.MkdirTemp("", "slidegate-bench-")
			if err != nil {
				return nil, err
			}
			if err := workerd.Build(ctx, root, pkg, dir, pack); err != nil {
				return nil, err
			}
			if err := cfg.Write(dir); err != nil {
				return nil, err
			}
			return workerd.Start(wrangler, dir, "/")
		}
		if bench.baseline, bench.err = start("./edge/testdata/baseline", false, workerd.Config{Name: "baseline"}); bench.err != nil {
			return
		}
		bench.slidegate, bench.err = start("./edge", true, workerd.Config{Name: "slidegate-bench", KV: true,
			Vars: map[string]string{varConfig: latencyConfig}})
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return bench.baseline, bench.slidegate
}

func timed(b *testing.B, c *http.Client, req func() *http.Request) time.Duration {
	b.Helper()
	t := time.Now()
	res, err := c.Do(req())
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	d := time.Since(t)
	if res.StatusCode != http.StatusOK {
		b.Fatalf("%s: %d", res.Request.URL, res.StatusCode)
	}
	return d
}

func p50(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

func BenchmarkWorkerdLatency(b *testing.B) {
	base, sg := benchWorkers(b)
	c := &http.Client{Timeout: 30 * time.Second}
	// Both Workers get the same request, byte for byte: under wrangler dev
	// a request with a body costs more than one without (the local proxy
	// in front of workerd streams it) whether or not the Worker reads it,
	// so a GET to the baseline would charge slidegate for the request's
	// shape. The hello world answers without reading the body. GETs are
	// timed too, to show that difference: the hello world's and
	// slidegate's GET /healthz (start-up, no decision). Each Worker gets
	// the same number of requests: an isolate that gets more runs faster.
	// The deltas are POST against POST.
	getter := func(url string) func() *http.Request {
		return func() *http.Request { r, _ := http.NewRequest("GET", url, nil); return r }
	}
	get, health := getter(base.URL+"/"), getter(sg.URL+"/healthz")
	post := func(url string) func() *http.Request {
		return func() *http.Request {
			r, _ := http.NewRequest("POST", url+"/v1/check", strings.NewReader(`{"key":"bench-key"}`))
			r.Header.Set("Content-Type", "application/json")
			return r
		}
	}
	hello, check := post(base.URL), post(sg.URL)
	for range 20 { // warm both isolates up
		timed(b, c, hello)
		timed(b, c, check)
	}
	var tb, tg, ts, th []time.Duration
	cpuB, errB := base.CPU()
	cpuS, errS := sg.CPU()
	b.ResetTimer()
	for b.Loop() {
		tb = append(tb, timed(b, c, hello))
		ts = append(ts, timed(b, c, check))
		tg = append(tg, timed(b, c, get))
		th = append(th, timed(b, c, health))
	}
	b.StopTimer()
	// CPU per request of each workerd, background work included: on a busy
	// machine a steadier measure than the latency.
	if endB, err := base.CPU(); err == nil && errB == nil {
		if endS, err := sg.CPU(); err == nil && errS == nil {
			// Per request, POSTs and GETs alike.
			perB := float64((endB - cpuB).Microseconds()) / 1000 / float64(len(tb)+len(tg))
			perS := float64((endS - cpuS).Microseconds()) / 1000 / float64(len(ts)+len(th))
			b.ReportMetric(perB, "baseline-cpu-ms/req")
			b.ReportMetric(perS, "slidegate-cpu-ms/req")
			b.ReportMetric(perS-perB, "delta-cpu-ms/req")
		}
	}
	pb, ps := p50(tb), p50(ts)
	b.ReportMetric(float64(pb.Microseconds())/1000, "baseline-p50-ms")
	b.ReportMetric(float64(ps.Microseconds())/1000, "slidegate-p50-ms")
	b.ReportMetric(float64((ps-pb).Microseconds())/1000, "delta-p50-ms")
	b.ReportMetric(float64(p50(tg).Microseconds())/1000, "baseline-get-p50-ms")
	b.ReportMetric(float64(p50(th).Microseconds())/1000, "slidegate-healthz-p50-ms")
}

func BenchmarkWorkerdSteadyLoad(b *testing.B) {
	w := slidegateWorker(b)
	c := &http.Client{Timeout: 30 * time.Second}
	const rps, secs = 20, 10
	before := len(debugState(b, w, "").Events)
	var (
		mu   sync.Mutex
		mems []int
		errs []string
		wg   sync.WaitGroup
	)
	tick := time.NewTicker(time.Second / rps)
	defer tick.Stop()
	b.ResetTimer()
	for range rps * secs {
		<-tick.C // a steady 20/s whatever the latency: one goroutine per request
		wg.Go(func() {
			r, _ := http.NewRequest("POST", w.URL+"/v1/check", strings.NewReader(`{"key":"`+steadyKey+`"}`))
			r.Header.Set("Content-Type", "application/json")
			res, err := c.Do(r)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err.Error())
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				errs = append(errs, res.Status)
			}
			if m, err := strconv.Atoi(res.Header.Get(memHeader)); err == nil {
				mems = append(mems, m)
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		b.Fatalf("steady load: %d failed, first: %s", len(errs), errs[0])
	}
	b.StopTimer()
	time.Sleep(2 * time.Second) // the trailing write
	evs := debugState(b, w, "").Events[before:]
	n := map[string]int{}
	puts := map[string][]int64{}
	for _, e := range evs {
		n[e.Op]++
		if e.Op == "put" {
			puts[e.Key] = append(puts[e.Key], e.At)
		}
	}
	most := 0 // writes of one key within any one second
	for _, ats := range puts {
		sort.Slice(ats, func(i, j int) bool { return ats[i] < ats[j] })
		for i := range ats {
			j := i
			for j < len(ats) && ats[j]-ats[i] < 1000 {
				j++
			}
			most = max(most, j-i)
		}
	}
	if n["req"] == 0 {
		b.Fatal("no requests logged")
	}
	sort.Ints(mems)
	b.ReportMetric(float64(n["put"])/float64(n["req"]), "puts/req")
	b.ReportMetric(float64(n["list"])/float64(n["req"]), "lists/req")
	// Per second of the Worker's clock, from the first request to the last
	// logged operation (the trailing write): the load may fall behind 20/s.
	span := float64(evs[len(evs)-1].At-evs[0].At) / 1000
	b.ReportMetric(float64(n["put"])/span, "puts/s")
	b.ReportMetric(float64(n["list"])/span, "lists/s")
	b.ReportMetric(float64(n["req"])/span, "req/s")
	b.ReportMetric(float64(len(puts)), "keys-written")
	b.ReportMetric(float64(most), "max-puts/key/s")
	if len(mems) > 0 {
		b.ReportMetric(float64(mems[len(mems)/2])/(1<<20), "go-mem-MiB")
	}
}

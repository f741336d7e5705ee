package main

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/internal/jsonv"
	"github.com/slidegate/slidegate/kvstore/workerskv"
)

// debugPath serves the debug log when SLIDEGATE_DEBUG is "1" (tests only).
const debugPath = "/__slidegate/debug"

// memHeader carries the Go instance's memory (the size of its Wasm linear
// memory: the static data and what the runtime has taken) on every response
// of a debug Worker.
const memHeader = "X-Slidegate-Debug-Mem"

// streamHeader is set to "1" on a debug Worker's answer whose body went
// to the runtime as the JavaScript stream fetch gave, as production's
// does, not copied through Go.
const streamHeader = "X-Slidegate-Debug-Stream"

// eventLog is an append-only log shared by the isolate's requests (a JS
// global array in the Worker).
type eventLog interface {
	Append(line string)
	Lines() []string
}

// debug instruments a Worker for the workerd tests: it logs every request
// and every KV operation with the Worker's clock, and serves the log and a
// KV listing at debugPath.
type debug struct {
	log eventLog
	now func() time.Time
	kv  workerskv.KV // the unrecorded binding, for listings
	mem func() uint64
	// live counts the isolate's Go instances that have not returned from
	// serve, the reading one included, and how many of those V8 has
	// collected; nil: not counted.
	live func() (live, freed int64)
}

// event is one logged request or KV operation.
type event struct {
	Op  string `json:"op"`  // req, put, list
	Key string `json:"key"` // request path, KV key or prefix
	At  int64  `json:"at"`  // Unix ms
}

func (d *debug) record(op, key string) {
	d.log.Append(op + "\t" + key + "\t" + strconv.FormatInt(d.now().UnixMilli(), 10))
}

func (d *debug) events() []event {
	lines := d.log.Lines()
	evs := make([]event, 0, len(lines))
	for _, l := range lines {
		f := strings.Split(l, "\t")
		if len(f) != 3 {
			continue
		}
		at, _ := strconv.ParseInt(f[2], 10, 64)
		evs = append(evs, event{Op: f[0], Key: f[1], At: at})
	}
	return evs
}

// recordingKV logs each operation before making it.
type recordingKV struct {
	// Not comparable, so that the Worker's bundle carries no equality
	// function for it (docs/edge.md, "Size").
	_ [0]func()

	workerskv.KV
	d *debug
}

func (k recordingKV) Put(ctx context.Context, key, value string, n int64, ttl time.Duration) error {
	k.d.record("put", key)
	return k.KV.Put(ctx, key, value, n, ttl)
}

func (k recordingKV) List(ctx context.Context, prefix, cursor string) (workerskv.Page, error) {
	k.d.record("list", prefix)
	return k.KV.List(ctx, prefix, cursor)
}

// debugReport is the body of GET debugPath.
type debugReport struct {
	Events []event         `json:"events"`
	Keys   []workerskv.Key `json:"keys,omitempty"` // ?list=prefix
	Live   int64           `json:"live"`           // Go instances not returned from serve, this one included
	Freed  int64           `json:"freed"`          // of those, the ones V8 collected
}

func (rep *debugReport) encode(e *jsonv.Encoder) {
	e.BeginObject()
	e.Key("events")
	e.BeginArray()
	for _, ev := range rep.Events {
		e.BeginObject()
		e.String("op", ev.Op)
		e.String("key", ev.Key)
		e.Int("at", ev.At)
		e.EndObject()
	}
	e.EndArray()
	e.Int("live", rep.Live)
	e.Int("freed", rep.Freed)
	if len(rep.Keys) > 0 {
		e.Key("keys")
		e.BeginArray()
		for _, k := range rep.Keys {
			e.BeginObject()
			e.String("Name", k.Name)
			e.Int("N", k.N)
			e.EndObject()
		}
		e.EndArray()
	}
	e.EndObject()
}

func (d *debug) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != debugPath {
			d.record("req", r.URL.Path)
			h.ServeHTTP(&memWriter{ResponseWriter: w, mem: d.mem}, r)
			return
		}
		rep := debugReport{Events: d.events()}
		if d.live != nil {
			rep.Live, rep.Freed = d.live()
		}
		if prefix := listParam(r.URL.RawQuery); prefix != "" {
			for cursor := ""; ; {
				p, err := d.kv.List(r.Context(), prefix, cursor)
				if err != nil {
					httpapi.WriteProblem(w, http.StatusBadGateway, "kv list failed", err.Error())
					return
				}
				rep.Keys = append(rep.Keys, p.Keys...)
				if cursor = p.Cursor; p.Done || cursor == "" {
					break
				}
			}
		}
		w.Header().Set("Content-Type", "application/json")
		var e jsonv.Encoder
		rep.encode(&e)
		_, _ = w.Write(append(e.Bytes(), '\n'))
	})
}

// listParam returns the first list parameter of the query q, unescaped, as
// url.Values.Get would: r.URL.Query() linked the Values map's parser, 3 KB
// of the Worker's gzip for this test-only route.
func listParam(q string) string {
	for pair := range strings.SplitSeq(q, "&") {
		if v, ok := strings.CutPrefix(pair, "list="); ok && !strings.Contains(v, ";") {
			if v, err := url.QueryUnescape(v); err == nil {
				return v
			}
		}
	}
	return ""
}

// memWriter adds memHeader when the response starts.
type memWriter struct {
	http.ResponseWriter
	mem  func() uint64
	once sync.Once
}

func (m *memWriter) stamp() {
	m.once.Do(func() { m.Header().Set(memHeader, strconv.FormatUint(m.mem(), 10)) })
}

func (m *memWriter) WriteHeader(code int) {
	m.stamp()
	m.ResponseWriter.WriteHeader(code)
}

func (m *memWriter) Write(b []byte) (int, error) {
	m.stamp()
	return m.ResponseWriter.Write(b)
}

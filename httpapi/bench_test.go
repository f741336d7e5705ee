package httpapi

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/slidegate/slidegate/config"
)

// nopWriter is a ResponseWriter that keeps one header map, so the benchmark
// measures the pre-filter, not the recorder.
type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *nopWriter) WriteHeader(int)             {}

// BenchmarkPreFilter: one admitted keyed request through the whole
// decision (ip_limits on the IP, two plan rules on the key, headers), with
// a no-op origin, at a fixed now.
func BenchmarkPreFilter(b *testing.B) {
	cfg := config.Default()
	for name, p := range cfg.Plans {
		for i := range p.Limits {
			p.Limits[i].Limit = config.MaxLimit
		}
		cfg.Plans[name] = p
	}
	cfg.IPLimits = []config.Limit{{Name: "ip-second", Limit: config.MaxLimit, Window: "1s", Scope: config.ScopeLocal}}
	now := time.Unix(1_800_000_000, 0)
	h, err := New(Options{
		Config: cfg,
		Next:   http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
		Now:    func() time.Time { return now },
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	reqs := make([]*http.Request, 1024)
	for i := range reqs {
		reqs[i] = httptest.NewRequest("GET", "/v1/items", nil)
		reqs[i].RemoteAddr = "192.0.2." + strconv.Itoa(i%250) + ":1234"
		reqs[i].Header.Set("X-API-Key", "key-"+strconv.Itoa(i))
	}
	w := &nopWriter{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		clear(w.h)
		h.ServeHTTP(w, reqs[i%len(reqs)])
	}
}

package main

import (
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
)

// BenchmarkFrontEnds: one request through each front end over loopback,
// from parallel clients; the difference of the two ns/op is what the
// pre-filter costs per request on this machine, client included.
func BenchmarkFrontEnds(b *testing.B) {
	f, err := setup(options{keys: 1000})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	defer client.CloseIdleConnections()
	for _, fe := range []struct{ name, url string }{{"bare", f.bare}, {"slidegate", f.filtered}} {
		b.Run(fe.name, func(b *testing.B) {
			var n atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest(http.MethodGet, fe.url+"/v1/items", nil)
					req.Header.Set("X-API-Key", f.keys[n.Add(1)%int64(len(f.keys))])
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Error("status " + strconv.Itoa(resp.StatusCode))
						return
					}
				}
			})
		})
	}
}

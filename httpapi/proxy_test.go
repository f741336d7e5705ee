package httpapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestProxyErrorLog: an origin that cuts its response body short makes the
// proxy complain; the complaint is a JSON line of the given logger, not a
// plain line on the standard logger.
func TestProxyErrorLog(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
		_ = buf.Flush()
	}))
	defer origin.Close()
	u, err := url.Parse(origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	p := NewProxy(u, slog.New(slog.NewJSONHandler(&logs, nil)))
	p.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/items", nil))

	var found bool
	for _, line := range strings.Split(logs.String(), "\n") {
		if line == "" {
			continue
		}
		var rec struct{ Level, Msg string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		if rec.Level == "WARN" && strings.Contains(rec.Msg, "read error during body copy") {
			found = true
		}
	}
	if !found {
		t.Errorf("no WARN line about the cut body in %q", logs.String())
	}
}

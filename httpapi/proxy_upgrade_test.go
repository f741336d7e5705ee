package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// countingOrigin is an origin that counts the requests it gets and
// answers each 200.
type countingOrigin struct{ n *atomic.Int32 }

func (o countingOrigin) RoundTrip(r *http.Request) (*http.Response, error) {
	o.n.Add(1)
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
}

// TestProxyUnprintableUpgradeNamesField: the 400 of a request whose
// Upgrade value is not printable ASCII names the field in
// invalid-params, as README promises of every 400, and the origin is not
// asked. It named it in the detail alone. The tab row pins the bytes Go's
// proxy refuses: were it to send such a value on, the row fails, as the
// ErrorHandler would then take an origin's failure for the client's 400.
func TestProxyUnprintableUpgradeNamesField(t *testing.T) {
	var reached atomic.Int32
	p := NewProxy(&url.URL{Scheme: "http", Host: "origin.test"}, nil, nil)
	p.Transport = countingOrigin{&reached}
	for _, upgrade := range []string{"web\xe9socket", "web\x7fsocket", "web\tsocket", "websocket, \xff"} {
		t.Run(upgrade, func(t *testing.T) {
			reached.Store(0)
			r := httptest.NewRequest("GET", "http://slidegate.test/socket", nil)
			r.Header.Set("Connection", "keep-alive, Upgrade")
			r.Header.Set("Upgrade", upgrade)
			w := httptest.NewRecorder()
			p.ServeHTTP(w, r)
			var pb problem
			if err := json.Unmarshal(w.Body.Bytes(), &pb); err != nil || w.Code != http.StatusBadRequest || reached.Load() != 0 {
				t.Fatalf("status %d, origin reached %d times, body %s (%v); want a 400 problem and no request to the origin", w.Code, reached.Load(), w.Body.String(), err)
			}
			if len(pb.InvalidParams) != 1 || pb.InvalidParams[0].Name != "Upgrade" || pb.InvalidParams[0].Reason == "" {
				t.Errorf("invalid-params %+v, want one naming Upgrade with a reason", pb.InvalidParams)
			}
		})
	}
}

// TestProxyUnprintableUpgradeIsClients: a request asking to upgrade to a
// protocol whose name is not printable ASCII (Upgrade: web\xe9socket, which
// Go's server takes) is refused by httputil.ReverseProxy before the
// origin is asked. That is the client's doing: a 400, not logged. It was
// answered 502 "the origin did not answer" and logged at ERROR as an
// origin error, so that any client could make a healthy origin look
// failing to whoever watches those lines. A printable one still reaches
// the origin.
func TestProxyUnprintableUpgradeIsClients(t *testing.T) {
	var reached atomic.Int32
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
	}))
	defer origin.Close()
	u, err := url.Parse(origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	p := NewProxy(u, slog.New(slog.NewJSONHandler(&logs, nil)), nil)
	tests := []struct {
		upgrade string
		status  int
		reached int32
	}{
		{"web\xe9socket", http.StatusBadRequest, 0},
		{"web\x7fsocket", http.StatusBadRequest, 0},
		{"web socket", http.StatusOK, 1},
	}
	for _, tt := range tests {
		t.Run(tt.upgrade, func(t *testing.T) {
			logs.Reset()
			reached.Store(0)
			r := httptest.NewRequest("GET", "http://slidegate.test/socket", nil)
			r.Header.Set("Connection", "Upgrade")
			r.Header.Set("Upgrade", tt.upgrade)
			w := httptest.NewRecorder()
			p.ServeHTTP(w, r)
			if w.Code != tt.status || reached.Load() != tt.reached {
				t.Fatalf("status %d, origin reached %d times; want %d, %d", w.Code, reached.Load(), tt.status, tt.reached)
			}
			if logs.Len() > 0 {
				t.Errorf("logged %s", logs.String())
			}
			if tt.status == http.StatusOK {
				return
			}
			var p problem
			if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" || json.Unmarshal(w.Body.Bytes(), &p) != nil || p.Status != tt.status || !strings.Contains(p.Detail, "Upgrade") {
				t.Errorf("answer %s %s, want a problem naming Upgrade", ct, w.Body.String())
			}
		})
	}
}

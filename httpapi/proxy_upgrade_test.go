package httpapi

import (
	"encoding/json"
	"io"
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

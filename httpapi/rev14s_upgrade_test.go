package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
)

// TestProxyUnprintableUpgradeNamesField: the 400 of a request whose
// Upgrade value is not printable ASCII names the field in
// invalid-params, as README promises of every 400, and the origin is not
// asked. It named it in the detail alone. The tab row pins the bytes Go's
// proxy refuses: were it to send such a value on, the row fails, as the
// ErrorHandler would then take an origin's failure for the client's 400.
func TestProxyUnprintableUpgradeNamesField(t *testing.T) {
	var reached atomic.Int32
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
	}))
	defer origin.Close()
	u, err := url.Parse(origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(u, nil, nil)
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

package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/internal/parity"
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/memstore"
)

// lambdaSide is the Lambda as setup builds it (Adapt over httpapi over
// httpapi.NewProxy, ClientIP sourceIP, local limits in a bounded memstore)
// with two substitutions setup has no parameter for: the test's clock, and
// a memstore in DynamoDB's place. Both stores are exact (DynamoDB admits
// and counts in one conditional write), and dynamostore passes the same
// conformance suite; the substitution is what keeps the test in process.
// Requests arrive as the events of a Function URL, or of an HTTP API when
// httpAPI is set. The shared store fails when c's Outage says.
func lambdaSide(t *testing.T, c parity.Config, clock *parity.Clock, httpAPI bool) parity.Side {
	t.Helper()
	cfg, err := config.Parse([]byte(c.Text))
	if err != nil {
		t.Fatal(err)
	}
	return lambdaSideOn(t, cfg, c.Store(memstore.New(), clock), clock, httpAPI)
}

// lambdaSideOn is lambdaSide with st as the shared store.
func lambdaSideOn(t *testing.T, cfg *config.Config, st kvstore.Store, clock *parity.Clock, httpAPI bool) parity.Side {
	t.Helper()
	origin := parity.NewOrigin(t)
	log := slog.New(slog.DiscardHandler)
	h, err := httpapi.New(httpapi.Options{
		Config: cfg, Store: st, Local: memstore.NewLimited(maxLocalIdentities),
		Next: httpapi.NewProxy(origin.URL, log, cfg.Identity.Prefixes()), PeerIP: sourceIP,
		Now: clock.Now, Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	return eventSide(h, httpAPI, origin.Take)
}

// eventSide sends requests to h through Adapt as the events of a Function
// URL (or an HTTP API); take returns what reached the origin.
func eventSide(h http.Handler, httpAPI bool, take func() (*parity.Seen, error)) parity.Side {
	handler := Adapt(h)
	name := "lambda (Function URL)"
	if httpAPI {
		name = "lambda (HTTP API)"
	}
	return parity.Side{Name: name, Do: func(r *parity.Request) (parity.Outcome, error) {
		res, err := handler(context.Background(), parityEvent(r, httpAPI))
		if err != nil {
			return parity.Outcome{}, err
		}
		out, err := parityAnswer(res)
		if err != nil {
			return parity.Outcome{}, err
		}
		seen, err := take()
		return parity.Outcome{Response: out, Seen: seen}, err
	}}
}

// parityEvent is the event a Function URL (or an HTTP API) sends for r,
// as AWS documents payload format 2.0: header names in lower case, the
// lines of a name joined with ",", Cookie lines moved to cookies, the
// body whole (no chunks; base64 unless UTF-8), the front end's
// x-forwarded-* and x-amzn-trace-id added, the client's address in
// sourceIp. An HTTP API decodes rawPath.
func parityEvent(r *parity.Request, httpAPI bool) events.APIGatewayV2HTTPRequest {
	domain, rawPath := fnURLDomain, r.Path() // adapter_test.go's names
	decoded, err := url.PathUnescape(r.Path())
	if err != nil {
		decoded = r.Path()
	}
	if httpAPI {
		domain, rawPath = httpAPIDomain, decoded
	}
	headers := map[string]string{}
	var cookies []string
	for _, f := range r.Header {
		k := strings.ToLower(f.Name)
		switch v, ok := headers[k]; {
		case k == "cookie":
			cookies = append(cookies, strings.Split(f.Value, "; ")...)
		case ok:
			headers[k] = v + "," + f.Value
		default:
			headers[k] = f.Value
		}
	}
	ip := r.Client.String()
	if xff, ok := headers["x-forwarded-for"]; ok {
		headers["x-forwarded-for"] = xff + ", " + ip
	} else {
		headers["x-forwarded-for"] = ip
	}
	headers["host"] = domain
	headers["user-agent"] = parity.UserAgent
	headers["x-forwarded-proto"] = "https"
	headers["x-forwarded-port"] = "443"
	headers["x-amzn-trace-id"] = "Root=1-67a0c0df-0123456789abcdef01234567"
	if len(r.Body) > 0 && !r.Chunked {
		headers["content-length"] = strconv.Itoa(len(r.Body))
	}
	body, b64 := string(r.Body), false
	if !utf8.Valid(r.Body) {
		body, b64 = base64.StdEncoding.EncodeToString(r.Body), true
	}
	return events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "$default", RawPath: rawPath, RawQueryString: r.Query(),
		Cookies: cookies, Headers: headers, Body: body, IsBase64Encoded: b64,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			DomainName: domain, Stage: "$default",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: r.Method, Path: decoded, Protocol: "HTTP/1.1", SourceIP: ip, UserAgent: parity.UserAgent,
			},
		},
	}
}

// parityAnswer is what the client gets of a response: each header a field
// of its own, each cookie a Set-Cookie, the body decoded.
func parityAnswer(res events.LambdaFunctionURLResponse) (parity.Response, error) {
	h := http.Header{}
	for k, v := range res.Headers {
		h.Add(k, v)
	}
	for _, c := range res.Cookies {
		h.Add("Set-Cookie", c)
	}
	body := []byte(res.Body)
	if res.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(res.Body); err != nil {
			return parity.Response{}, fmt.Errorf("body: %w", err)
		}
	}
	return parity.Response{Status: res.StatusCode, Header: h, Body: body}, nil
}

// lambdaNormaliser takes out of the Lambda's outcome what is the front
// end's, documented in docs/lambda.md:
//
//   - X-Amzn-Trace-Id, which AWS adds to every event and the proxy passes
//     on as any other header;
//   - for an HTTP API, the escapes of the path: it decodes rawPath before
//     the function runs, and the adapter escapes again only what must be
//     ("What reaches the origin": /files/%41%42 reaches the origin as
//     /files/AB), so the paths the origins got are compared decoded.
func lambdaNormaliser(httpAPI bool) parity.Normaliser {
	return func(_ *parity.Request, ref, got *parity.Outcome) {
		if got.Seen != nil {
			got.Seen.Header.Del("X-Amzn-Trace-Id")
		}
		if !httpAPI || ref.Seen == nil || got.Seen == nil {
			return
		}
		for _, s := range []*parity.Seen{ref.Seen, got.Seen} {
			if p, err := url.PathUnescape(s.Path); err == nil {
				s.Path = p
			}
		}
	}
}

// TestParityWithLocal: generated sequences of requests get the same
// answers (status, rate-limit fields, problem+json and check bodies, the
// origin's answer) from the Lambda as from the local server, and the
// origin gets the same request (method, path, query, headers, body), at
// every instant of the same clock, for each configuration (those with a
// store in an outage included) and for both front ends. Keys with Unicode
// white space around them are one client with the key within, and reach
// the origin trimmed, as on the local server.
func TestParityWithLocal(t *testing.T) {
	for _, httpAPI := range []bool{false, true} {
		t.Run(fmt.Sprint("httpAPI=", httpAPI), func(t *testing.T) {
			build := func(t *testing.T, c parity.Config, clock *parity.Clock) parity.Side {
				return lambdaSide(t, c, clock, httpAPI)
			}
			o := parity.Options{SplitKeys: true, PlanOverrides: true, StepsBack: true, UnicodeSpace: true}
			parity.RunAll(t, o, build, lambdaNormaliser(httpAPI))
		})
	}
}

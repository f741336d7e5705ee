package httpapi

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/internal/jsonv"
)

// MaxCheckBody is the largest POST /v1/check body, in bytes: room for a
// key as long as any the local server's pre-filter counts (its header
// bound lets one of about 68 KiB through) with the other fields. At
// 4 KiB, a service passing on its clients' Authorization was answered a
// 400 for those with the largest bearer tokens (an Entra ID token listing
// 200 groups is about 10 KB), which the pre-filter counts.
const MaxCheckBody = 72 << 10

// checkRequest is the body of POST /v1/check.
type checkRequest struct {
	// Key is the client's API key, as the client sent it. Required.
	Key string `json:"key"`
	// Plan overrides the key's plan; empty means the plan api_keys gives
	// the key, or default_plan.
	Plan string `json:"plan"`
	// Cost defaults to 1; 0 reads the state without counting.
	Cost *int64 `json:"cost"`
}

// checkRule is one rule's decision in a check answer.
type checkRule struct {
	// Not comparable, so that the Worker's bundle carries no equality
	// function for it (docs/edge.md, "Size").
	_ [0]func()

	Name         string `json:"name"`
	Allowed      bool   `json:"allowed"`
	Limit        int64  `json:"limit"`
	WindowS      int64  `json:"window_s"`
	Remaining    int64  `json:"remaining"`
	ResetAfterMS int64  `json:"reset_after_ms"`
	RetryAfterMS int64  `json:"retry_after_ms"`
}

// checkResponse is the body of a 200 answer of POST /v1/check.
type checkResponse struct {
	Allowed      bool        `json:"allowed"`
	Limit        int64       `json:"limit"`
	Remaining    int64       `json:"remaining"`
	ResetAfterMS int64       `json:"reset_after_ms"`
	RetryAfterMS int64       `json:"retry_after_ms"`
	Policy       string      `json:"policy"`
	Plan         string      `json:"plan"`
	Rules        []checkRule `json:"rules"`
	// ShadowDenied: shadow mode answered allowed although a limit denied.
	ShadowDenied bool `json:"shadow_denied,omitempty"`
	// StoreError: the store failed and on_store_error is allow.
	StoreError bool `json:"store_error,omitempty"`
}

// fieldError is a check request error that names its field.
type fieldError struct {
	field  string
	reason string
}

func (e *fieldError) Error() string { return e.field + ": " + e.reason }

// decodeCheck reads a check request body of at most MaxCheckBody bytes:
// one JSON object with no unknown or repeated fields, a key that the
// pre-filter would take for one (trimmed of white space as it is; not a
// credential of one request: signature) and a non-negative cost. A leading UTF-8 byte order mark is ignored (RFC 8259
// section 8.1 allows it; some clients send one).
func decodeCheck(body io.Reader) (checkRequest, *fieldError) {
	var req checkRequest
	data, err := io.ReadAll(io.LimitReader(body, MaxCheckBody+1))
	if err != nil {
		return req, &fieldError{"(body)", "cannot be read: " + err.Error()}
	}
	if len(data) > MaxCheckBody {
		return req, &fieldError{"(body)", fmt.Sprintf("larger than %d bytes", MaxCheckBody)}
	}
	bom := len(data)
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	bom -= len(data)
	tree, err := jsonv.Parse(data)
	if err != nil {
		if len(bytes.TrimSpace(data)) == 0 {
			return req, &fieldError{"(body)", "is empty: send {\"key\": \"...\"}"}
		}
		se, ok := err.(*jsonv.SyntaxError) // not errors.As: it links reflectlite into the Worker
		switch {
		case !ok:
		case se.Offset >= int64(len(data)):
			return req, &fieldError{"(body)", "ends in the middle of the JSON"}
		case se.Msg == jsonv.Trailing:
			return req, &fieldError{"(body)", "must hold one JSON object and nothing after it"}
		case se.Offset >= 0: // counted from 1, as the configuration's columns are
			return req, &fieldError{"(body)", fmt.Sprintf("invalid JSON at byte %d: %s", se.Offset+1+int64(bom), se.Msg)}
		}
		return req, &fieldError{"(body)", "invalid JSON: " + err.Error()}
	}
	obj, ok := tree.(map[string]any)
	if !ok {
		return req, &fieldError{"(body)", "must be a JSON object"}
	}
	// The parsed object keeps the last of a repeated name: {"key":"a",
	// "key":"b"} was counted as "b", while a gateway or log in front may
	// read "a".
	if p, ok := jsonv.Repeated(data); ok {
		if len(p) > 1 { // {"key": {"a": 1, "a": 2}, "key": "b"} counts "b"
			return req, &fieldError{fieldName(p[0].Name), "holds a member given more than once"}
		}
		return req, &fieldError{fieldName(p[0].Name), "appears more than once"}
	}
	for _, k := range jsonv.SortedKeys(obj) {
		switch v := obj[k]; k {
		case "key", "plan":
			s, ok := v.(string)
			if !ok && v != nil {
				return req, &fieldError{k, "must be a string, got JSON " + jsonv.TypeName(v)}
			}
			if k == "key" {
				req.Key = s
			} else {
				req.Plan = s
			}
		case "cost":
			if v == nil {
				continue
			}
			n, ok := v.(jsonv.Number)
			if !ok {
				return req, &fieldError{k, "must be an integer, got JSON " + jsonv.TypeName(v)}
			}
			c, err := n.Int64()
			if err != nil {
				return req, &fieldError{k, costReason(n)}
			}
			req.Cost = &c
		default:
			return req, &fieldError{fieldName(k), "unknown field (known: key, plan, cost)"}
		}
	}
	// The key is what the pre-filter counts for a key header of this
	// value (apiKey): white space around it is not the key's, and what is
	// no key there (only white space, a credential of one request) is none here.
	// Counted as given, " k" (a Lambda event's header value passed on) or
	// "k\n" (a line read from a file) was a fresh client while the
	// pre-filter counted k, and a signature, new with each request, a
	// client never limited. Its length is the body's to bound
	// (MaxCheckBody): a bound of 1 KiB of its own refused the bearer
	// tokens identity providers issue (a Keycloak or Entra ID access
	// token is 1.5 to 2.5 KB), which the pre-filter counts, so a service
	// passing on Authorization was answered a 400 for its clients with the
	// larger tokens alone.
	given := req.Key
	req.Key = trimKey(given) // Unicode's white space too: "<key>\u00a0" was a client of its own
	switch {
	case given == "":
		return req, &fieldError{"key", "is required"}
	case req.Key == "":
		return req, &fieldError{"key", "is only white space, which is no key"}
	case signature(req.Key):
		return req, &fieldError{"key", "is a credential of one request (a signature of the scheme AWS, AWS4-HMAC-SHA256, AWS4-ECDSA-P256-SHA256, GOOG4-HMAC-SHA256, GOOG4-RSA-SHA256, SharedKey, SharedKeyLite, Hawk or Signature; Digest; OAuth 1.0), which is no key (it changes with each request): send the client's API key"}
	case req.Cost != nil && *req.Cost < 0:
		return req, &fieldError{"cost", fmt.Sprintf("%d: must not be negative", *req.Cost)}
	}
	return req, nil
}

// costReason says why a cost that Number.Int64 refused is wrong: a
// fraction, or an integer beyond int64 (Int64 reads an integer written
// with a fraction or an exponent only below 2^53, and anything at or above
// 2^53 as a float64 is an integer).
func costReason(n jsonv.Number) string {
	f, _ := strconv.ParseFloat(string(n), 64) // ±Inf beyond float64
	switch {
	case math.Abs(f) < 1<<53:
		return "must be an integer, got JSON number " + string(n)
	case f < 0:
		return string(n) + ": must not be negative"
	}
	return fmt.Sprintf("%s: must be at most %d, the largest limit a plan can have", n, config.MaxLimit)
}

// fieldName is a member name as an error names it: "" is shown quoted.
func fieldName(k string) string {
	if k == "" {
		return `""`
	}
	return k
}

func (c *checkResponse) encode(e *jsonv.Encoder) {
	e.BeginObject()
	e.Bool("allowed", c.Allowed)
	e.Int("limit", c.Limit)
	e.Int("remaining", c.Remaining)
	e.Int("reset_after_ms", c.ResetAfterMS)
	e.Int("retry_after_ms", c.RetryAfterMS)
	e.String("policy", c.Policy)
	e.String("plan", c.Plan)
	e.Key("rules")
	e.BeginArray()
	for _, r := range c.Rules {
		e.BeginObject()
		e.String("name", r.Name)
		e.Bool("allowed", r.Allowed)
		e.Int("limit", r.Limit)
		e.Int("window_s", r.WindowS)
		e.Int("remaining", r.Remaining)
		e.Int("reset_after_ms", r.ResetAfterMS)
		e.Int("retry_after_ms", r.RetryAfterMS)
		e.EndObject()
	}
	e.EndArray()
	if c.ShadowDenied {
		e.Bool("shadow_denied", true)
	}
	if c.StoreError {
		e.Bool("store_error", true)
	}
	e.EndObject()
}

// authorized reports whether the request carries the check token, compared
// in constant time. Authorization on several lines is refused: on Lambda
// and Workers the lines arrive joined with commas, which no token matches,
// and a request is authorized or not whichever front end reads it.
func (h *Handler) authorized(r *http.Request) bool {
	if !h.checkToken {
		return true
	}
	vs := r.Header["Authorization"]
	if len(vs) != 1 {
		return false
	}
	// White space around the value is not the value's: every platform
	// drops it (the Lambda's adapter since 925519a; " Bearer <token>" was
	// refused there alone), a request handed in process may keep it. Only HTTP's white space:
	// strings.TrimSpace also took a no-break space for none.
	scheme, token, ok := strings.Cut(textproto.TrimString(vs[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(textproto.TrimString(token)))
	return subtle.ConstantTimeCompare(got[:], h.checkSum[:]) == 1
}

// check serves POST /v1/check: the decision for a key, counted like a
// request through the pre-filter, without ip_limits (the caller is a
// service, not the client). The plan is the request's "plan" when given:
// the calling service knows its users' plans and is trusted by
// check_token; otherwise the key's plan from api_keys, or default_plan.
func (h *Handler) check(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeProblem(w, http.StatusMethodNotAllowed, "use POST", nil)
		return
	}
	if !h.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="slidegate"`)
		writeProblem(w, http.StatusUnauthorized, "POST /v1/check needs Authorization: Bearer <check_token>", nil)
		return
	}
	body := r.Body
	if body == nil {
		// A request built in Go and handed to the Handler (a client's
		// request has no Body without a body): MaxBytesReader would
		// panic on it.
		body = http.NoBody
	}
	req, ferr := decodeCheck(http.MaxBytesReader(w, body, MaxCheckBody+1))
	if ferr != nil {
		writeProblem(w, http.StatusBadRequest, ferr.Error(), []invalidParam{{Name: ferr.field, Reason: ferr.reason}})
		return
	}
	var sum [sha256.Size]byte
	hashKey(req.Key, &sum)
	id, p := "", h.defPlan
	if kid, kp, ok := h.keys.find(&sum); ok {
		id, p = kid, kp
	} else {
		id = keyIdentity(&sum)
	}
	if req.Plan != "" {
		var ok bool
		if p, ok = h.plans[req.Plan]; !ok {
			reason := fmt.Sprintf("%q: no such plan", req.Plan)
			writeProblem(w, http.StatusBadRequest, "plan: "+reason, []invalidParam{{Name: "plan", Reason: reason}})
			return
		}
	}
	cost := int64(1)
	if req.Cost != nil {
		cost = *req.Cost
	}
	if cost > p.minLimit {
		reason := fmt.Sprintf("%d: must be at most %d, the smallest limit of plan %q", cost, p.minLimit, p.name)
		writeProblem(w, http.StatusBadRequest, "cost: "+reason, []invalidParam{{Name: "cost", Reason: reason}})
		return
	}
	now := h.now()
	v := verdicts.Get().(*verdict)
	defer verdicts.Put(v)
	v.reset()
	h.decide(r.Context(), now, "", nil, id, p, cost, v)
	if v.aside != nil {
		h.logStoreError(r, v.aside, v.asideAction, v.asideID, p)
	}
	if v.uncounted != nil {
		h.logStoreError(r, v.uncounted, "deny", v.uncountedID, p)
	}
	if v.err != nil {
		if h.storeError(w, r, v.err, id, p) {
			writeJSON(w, http.StatusOK, "application/json", &checkResponse{Allowed: true, Plan: p.name, Rules: []checkRule{}, StoreError: true})
		}
		return
	}
	setHeaders(w.Header(), p.planPolicy, p.planItems, v.ds[:v.n], v.deciding, now)
	d := shown(v.ds[:v.n], v.deciding) // the numbers of X-RateLimit-*
	resp := checkResponse{
		Allowed:      d.Allowed,
		Limit:        d.Limit,
		Remaining:    d.Remaining,
		ResetAfterMS: ceilDiv(d.ResetAfter, time.Millisecond),
		RetryAfterMS: retryMS(d.RetryAfter),
		Policy:       d.Rule,
		Plan:         p.name,
		Rules:        make([]checkRule, 0, v.n),
	}
	for _, rd := range v.ds[:v.n] {
		if undecided(rd) {
			continue
		}
		resp.Rules = append(resp.Rules, checkRule{
			Name:         rd.Rule,
			Allowed:      rd.Allowed,
			Limit:        rd.Limit,
			WindowS:      int64(rd.Period / time.Second),
			Remaining:    rd.Remaining,
			ResetAfterMS: ceilDiv(rd.ResetAfter, time.Millisecond),
			RetryAfterMS: retryMS(rd.RetryAfter),
		})
	}
	if !d.Allowed {
		h.logDenied(r, id, p, cost, v)
		if h.shadow {
			resp.Allowed, resp.ShadowDenied, resp.RetryAfterMS = true, true, 0
			w.Header().Del(hRetry)
			w.Header().Set(ShadowHeader, "denied")
		}
	}
	writeJSON(w, http.StatusOK, "application/json", &resp)
}

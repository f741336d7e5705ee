package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/slidegate/slidegate/internal/jsonv"
	"github.com/slidegate/slidegate/window"
)

// RateLimitedType is the problem type of a 429, documented in the README.
const RateLimitedType = "https://github.com/slidegate/slidegate#429-responses"

// problem is an RFC 9457 problem detail.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	// InvalidParams names the request fields that are wrong (RFC 9457's
	// example extension).
	InvalidParams []invalidParam `json:"invalid-params,omitempty"`
}

type invalidParam struct {
	// Not comparable, so that the Worker's bundle carries no equality
	// function for it (docs/edge.md, "Size").
	_ [0]func()

	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// tooMany is the body of a 429.
type tooMany struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies"`
	Limit            int64    `json:"limit"`
	Remaining        int64    `json:"remaining"`
	RetryAfterMS     int64    `json:"retry_after_ms"`
	Plan             string   `json:"plan"`
	UpgradeURL       string   `json:"upgrade_url,omitempty"`
}

// encoder is a body that writes itself. The bodies are written by hand
// rather than by encoding/json, which would add a tenth to the Worker's
// Wasm bundle; TestBodiesLikeEncodingJSON holds each writer to the output
// json.Marshal gives for its struct, tags included.
type encoder interface {
	encode(e *jsonv.Encoder)
}

func (p *problem) encode(e *jsonv.Encoder) {
	e.BeginObject()
	e.String("type", p.Type)
	e.String("title", p.Title)
	e.Int("status", int64(p.Status))
	e.String("detail", p.Detail)
	if len(p.InvalidParams) > 0 {
		e.Key("invalid-params")
		e.BeginArray()
		for _, ip := range p.InvalidParams {
			e.BeginObject()
			e.String("name", ip.Name)
			e.String("reason", ip.Reason)
			e.EndObject()
		}
		e.EndArray()
	}
	e.EndObject()
}

func (t *tooMany) encode(e *jsonv.Encoder) {
	e.BeginObject()
	e.String("type", t.Type)
	e.String("title", t.Title)
	e.Int("status", int64(t.Status))
	e.String("detail", t.Detail)
	e.Strings("violated-policies", t.ViolatedPolicies)
	e.Int("limit", t.Limit)
	e.Int("remaining", t.Remaining)
	e.Int("retry_after_ms", t.RetryAfterMS)
	e.String("plan", t.Plan)
	if t.UpgradeURL != "" {
		e.String("upgrade_url", t.UpgradeURL)
	}
	e.EndObject()
}

func writeJSON(w http.ResponseWriter, status int, contentType string, v encoder) {
	var e jsonv.Encoder
	v.encode(&e)
	body := e.Bytes()
	hd := w.Header()
	hd.Set("Content-Type", contentType)
	hd.Set("Cache-Control", "no-store")
	hd.Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// WriteProblem answers a problem of type about:blank with the given title:
// for what a platform main answers itself (a Worker whose configuration
// failed, an origin it could not reach).
func WriteProblem(w http.ResponseWriter, status int, title, detail string) {
	writeJSON(w, status, "application/problem+json", &problem{
		Type: "about:blank", Title: title, Status: status, Detail: detail,
	})
}

// writeProblem answers a problem of type about:blank, whose title is the
// status text.
func writeProblem(w http.ResponseWriter, status int, detail string, params []invalidParam) {
	writeJSON(w, status, "application/problem+json", &problem{
		Type:          "about:blank",
		Title:         http.StatusText(status),
		Status:        status,
		Detail:        detail,
		InvalidParams: params,
	})
}

// writeTooMany answers 429 for a denied verdict; the rate-limit headers are
// already set.
func writeTooMany(w http.ResponseWriter, p *plan, v *verdict) {
	d := v.deciding
	body := tooMany{
		Type:         RateLimitedType,
		Title:        "Too Many Requests",
		Status:       http.StatusTooManyRequests,
		Detail:       detail(d),
		Limit:        d.Limit,
		Remaining:    d.Remaining,
		RetryAfterMS: retryMS(d.RetryAfter),
		Plan:         p.name,
		UpgradeURL:   p.upgradeURL,
	}
	for _, r := range v.ds[:v.n] {
		// A rule not decided refused nothing.
		if !r.Allowed && !undecided(r) {
			body.ViolatedPolicies = append(body.ViolatedPolicies, r.Rule)
		}
	}
	writeJSON(w, http.StatusTooManyRequests, "application/problem+json", &body)
}

func detail(d window.Decision) string {
	if d.RetryAfter == window.Never {
		return fmt.Sprintf("The request costs more than limit %q allows (%d per %s).", d.Rule, d.Limit, period(d.Period))
	}
	if d.Remaining > 0 {
		// A request that costs more than is left: "used up" would
		// contradict the body's remaining.
		return fmt.Sprintf("Limit %q (%d per %s) has %d left, less than the request costs; retry in %d s.", d.Rule, d.Limit, period(d.Period), d.Remaining, retrySeconds(d.RetryAfter))
	}
	return fmt.Sprintf("Limit %q (%d per %s) is used up; retry in %d s.", d.Rule, d.Limit, period(d.Period), retrySeconds(d.RetryAfter))
}

// period formats a window as written in configurations: 1m, 24h, 90s.
func period(d time.Duration) string {
	s := d.String()
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		s = t + "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
}

// retryMS is a RetryAfter in milliseconds, rounded up; -1 for Never.
func retryMS(d time.Duration) int64 {
	if d == window.Never {
		return -1
	}
	return ceilDiv(d, time.Millisecond)
}

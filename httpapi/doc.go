// Package httpapi is slidegate's HTTP layer, shared unchanged by the local
// server, the Cloudflare Worker and the AWS Lambda: it identifies the
// client, picks its plan and rules, asks the limiter, writes the rate-limit
// headers, and either answers 429 (application/problem+json) or hands the
// request to the origin. It also serves the check API (POST /v1/check) for
// services that ask slidegate instead of sitting behind it, and GET /healthz.
package httpapi

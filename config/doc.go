// Package config is slidegate's configuration: the plans and their limits,
// the API keys and the plan each one is on, how a client is identified, the
// per-IP limits, route costs, and what to do when the counter store fails.
//
// A configuration is JSON, read when a process starts (a file for the
// local server, which reads it again on SIGHUP; an environment variable on
// Lambda, a wrangler variable on the Worker). Parse rejects unknown fields
// and every invalid value with an error that names the field path and the
// value, for example
//
//	config: plans.free.limits[1].window: "0s": must be at least 1s
//
// An empty document, or one without "plans", gets the three default plans
// (see Default).
package config

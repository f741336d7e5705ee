// Package accuracy measures how far slidegate's weighted two-bucket window
// (package window) strays from an exact sliding log with the same limit and
// period.
//
// It has four parts:
//
//   - Generators (Poisson, OnOff, ManySources, Boundary) build request traces
//     deterministically from a seed.
//   - SlidingLog is the exact reference limiter: it remembers every counted
//     request of the last period.
//   - Replay runs a trace through the two-bucket window, with per-source
//     epoch-aligned previous/current counters kept exactly as a store keeps
//     them, and through the sliding log, in one of two counting modes
//     (CountAdmitted, CountAll), and returns the error metrics.
//   - Run and Report.Write turn a Config into docs/accuracy.md and its SVG
//     plots (hand-written SVG, standard library only).
//
// The central definition: a decision of the two-bucket window is wrong when
// an exact sliding log fed the same counted history (the requests the window
// itself counted) would have decided the other way. That is the comparison
// Cloudflare's published evaluation makes (the approximate and the real rate
// of a source computed from the same requests); see docs/accuracy.md for the
// full discussion and for the other possible definition, which Replay also
// reports as Diverged.
package accuracy

// Package window is the pure arithmetic of slidegate's sliding window: a
// weighted two-bucket estimate over epoch-aligned buckets,
//
//	overlap  = 1 - (t - start(i)) / period
//	estimate = floor(count(i-1) × overlap) + count(i)
//
// admission of a request of cost c iff estimate + c <= limit, and the exact
// time until a denied request would be admitted.
//
// The package does no I/O, reads no clock (every function takes the time)
// and allocates nothing. Products are computed in 128 bits, so a day-long
// period with a large limit cannot overflow.
package window

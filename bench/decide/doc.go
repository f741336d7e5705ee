// Package decide measures window.Rule.Decide and DecideInto against the
// floor of their own benchmarks: calls of the same shape that compute
// nothing. Issue 2 asks for a decision in at most 20 ns; on a machine
// where the call and the copy of its 80-byte result alone take most of
// that, the ratio to the floor, measured in the same run, says how much
// of the time is the decision's own work. It has no code outside its
// tests.
package decide

package accuracy

import (
	"errors"
	"testing"
	"time"
)

func TestWorstWindow(t *testing.T) {
	secs := func(ss ...float64) []time.Time {
		var ts []time.Time
		for _, s := range ss {
			ts = append(ts, at(s))
		}
		return ts
	}
	tests := []struct {
		name  string
		times []time.Time
		n     int64
		start float64
	}{
		// [0,10) holds 0, 1, 5, 9.999 (4); [1,11) holds 1, 5, 9.999, 10,
		// 10.5 (5); [5,15) holds 4; [30,40) holds 1.
		{"hand", secs(0, 1, 5, 9.999, 10, 10.5, 30), 5, 1},
		// A request exactly one period later is outside the window.
		{"half open", secs(0, 10, 20, 30), 1, 0},
		{"same instant", secs(3, 3, 3, 13), 3, 3},
		{"one", secs(7), 1, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, start, err := WorstWindow(tt.times, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if n != tt.n || !start.Equal(at(tt.start)) {
				t.Errorf("WorstWindow = %d from %v, want %d from %gs", n, start.Sub(at(0)), tt.n, tt.start)
			}
		})
	}
	t.Run("empty", func(t *testing.T) {
		if n, start, err := WorstWindow(nil, time.Second); n != 0 || !start.IsZero() || err != nil {
			t.Errorf("WorstWindow(nil) = %d, %v, %v, want 0, zero, nil", n, start, err)
		}
	})
	t.Run("unsorted", func(t *testing.T) {
		if _, _, err := WorstWindow(secs(1, 3, 2), time.Second); !errors.Is(err, ErrUnsorted) {
			t.Errorf("error = %v, want ErrUnsorted", err)
		}
	})
	t.Run("bad period", func(t *testing.T) {
		if _, _, err := WorstWindow(secs(1), 0); !errors.Is(err, ErrParam) {
			t.Errorf("error = %v, want ErrParam", err)
		}
	})
}

// TestSliding checks the step function drawn in the boundary plot against
// hand-made instants, period 10 s: requests at 1, 2, 2, 12 count 1 from 1,
// 3 from 2, 2 from 11, 0 from 12 until 12 itself enters (1), 0 from 22.
func TestSliding(t *testing.T) {
	times := []time.Time{at(1), at(2), at(2), at(12)}
	got := sliding(times, 10*time.Second, at(0), at(30))
	want := []step{{at(0), 0}, {at(1), 1}, {at(2), 3}, {at(11), 2}, {at(12), 1}, {at(22), 0}, {at(30), 0}}
	if len(got) != len(want) {
		t.Fatalf("sliding = %v, want %v", got, want)
	}
	for i := range want {
		if !got[i].at.Equal(want[i].at) || got[i].n != want[i].n {
			t.Errorf("step %d = (%v, %d), want (%v, %d)", i, got[i].at.Sub(at(0)), got[i].n, want[i].at.Sub(at(0)), want[i].n)
		}
	}
	// Starting inside the trace: the count carries in.
	got = sliding(times, 10*time.Second, at(5), at(11.5))
	want = []step{{at(5), 3}, {at(11), 2}, {at(11.5), 2}}
	if len(got) != len(want) {
		t.Fatalf("sliding from 5s = %v, want %v", got, want)
	}
	for i := range want {
		if !got[i].at.Equal(want[i].at) || got[i].n != want[i].n {
			t.Errorf("from 5s: step %d = (%v, %d), want (%v, %d)", i, got[i].at.Sub(at(0)), got[i].n, want[i].at.Sub(at(0)), want[i].n)
		}
	}
}

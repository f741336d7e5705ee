package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunWritesReport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "docs")
	var stdout, stderr bytes.Buffer
	if err := run([]string{"-out", dir, "-quick", "-seed", "3"}, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v (stderr %q)", err, stderr.String())
	}
	for _, name := range []string{"accuracy.md", "accuracy-wrong-vs-rate.svg", "accuracy-boundary.svg"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(data) == 0 {
			t.Errorf("%s is empty", name)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "accuracy.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "Seed 3.") {
		t.Error("accuracy.md does not name the seed given by -seed")
	}
	if !strings.Contains(stdout.String(), "accuracy.md") {
		t.Errorf("stdout = %q, want a line naming the report", stdout.String())
	}
}

func TestRunRejectsBadArguments(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no out", nil, "-out"},
		{"extra argument", []string{"-out", "x", "docs"}, `unexpected argument "docs"`},
		{"unknown flag", []string{"-nope"}, "nope"},
		{"bad seed", []string{"-out", "x", "-seed", "minus"}, "seed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(tt.args, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error()+stderr.String(), tt.want) {
				t.Errorf("run(%q) = %v, want an error naming %s", tt.args, err, tt.want)
			}
		})
	}
}

// TestRunHelp: -h prints the flags and is no failure (it exited with
// status 2, as for a bad argument).
func TestRunHelp(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help"} {
		var stdout, stderr bytes.Buffer
		if err := run([]string{arg}, &stdout, &stderr); err != nil || !strings.Contains(stderr.String(), "-out") {
			t.Errorf("run(%s) = %v, usage %q; want nil and the flags", arg, err, stderr.String())
		}
	}
}

// TestRunReportsUnwritableDir points -out at a regular file.
func TestRunReportsUnwritableDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := run([]string{"-out", file, "-quick"}, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "-out") {
		t.Errorf("run(-out file) = %v, want a write error", err)
	}
}

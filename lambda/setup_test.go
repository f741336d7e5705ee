package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestSetupRejects(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want error
		text string
	}{
		{"no table", map[string]string{}, ErrTable, EnvTable},
		{"config not json", map[string]string{EnvTable: "t", EnvConfig: "{"}, ErrConfig, EnvConfig},
		{"config invalid", map[string]string{EnvTable: "t", EnvConfig: `{"store_timeout":"soon"}`}, ErrConfig, "store_timeout"},
		{"origin relative", map[string]string{EnvTable: "t", EnvOrigin: "example.com/app"}, ErrOrigin, "example.com/app"},
		{"origin scheme", map[string]string{EnvTable: "t", EnvOrigin: "ftp://example.com"}, ErrOrigin, EnvOrigin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := setup(context.Background(), func(k string) string { return tt.env[k] }, io.Discard)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.text) {
				t.Errorf("setup = %v, want %v naming %q", err, tt.want, tt.text)
			}
		})
	}
}

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
		{"origin without a host", map[string]string{EnvTable: "t", EnvOrigin: "https://:443"}, ErrOrigin, "with a host"},
		{"origin port", map[string]string{EnvTable: "t", EnvOrigin: "https://example.com:99999"}, ErrOrigin, "1 to 65535"},
		{"origin user info", map[string]string{EnvTable: "t", EnvOrigin: "https://u:secret@example.com"}, ErrOrigin, "user info"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := setup(context.Background(), func(k string) string { return tt.env[k] }, io.Discard)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.text) || strings.Contains(err.Error(), "secret") {
				t.Errorf("setup = %v, want %v naming %q (and no password)", err, tt.want, tt.text)
			}
		})
	}
}

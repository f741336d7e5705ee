package httpapi

import (
	"strings"
	"testing"
)

// FuzzMethodParams: methodParams never panics, whatever the query.
func FuzzMethodParams(f *testing.F) {
	for _, s := range []string{
		"_method=POST", "%5Fmethod=P%4FST", "+_method=x", "_method%00=POST", "%", "%%", "=", "&&",
		"_method", "%20%20.method=DELETE&a=%zz", "\x00method=1", "_method%00%zz=DELETE",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		for _, v := range methodParams(q) {
			_ = strings.ToUpper(v)
		}
	})
}

// FuzzParseOrigin: ParseOrigin never panics, and its error never shows
// what stands right before an "@" (a password) or after a "?" (a token).
func FuzzParseOrigin(f *testing.F) {
	for _, s := range []string{
		"https://origin.example", "https://u:SECRET@h", "ftp://h/?a@b&t=SECRET", "https://", "http://[::1]:0/", "%",
		"https:SECRET@x", "https://svc:0/SECRET@origin.example", "https://h:0/?t=SECRET", "svc:SECRET@h",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, err := ParseOrigin(s)
		if err == nil {
			return
		}
		before, _, at := strings.Cut(s, "SECRET@")
		_, query, q := strings.Cut(s, "?")
		if (at && !strings.Contains(before, "SECRET") || q && strings.Contains(query, "SECRET") && !strings.Contains(s[:strings.Index(s, "?")], "SECRET")) &&
			strings.Contains(err.Error(), "SECRET") {
			t.Errorf("ParseOrigin(%q): the error shows the secret: %v", s, err)
		}
	})
}

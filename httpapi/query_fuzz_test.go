package httpapi

import (
	"slices"
	"strings"
	"testing"
)

// FuzzMethodParams holds methodParams, which reads names without a copy,
// to its rules done on decoded copies: each name decoded (unescapeLoose),
// without leading spaces, up to a NUL, "_method" with "." or " " allowed
// for its "_".
func FuzzMethodParams(f *testing.F) {
	for _, s := range []string{
		"_method=POST", "%5Fmethod=P%4FST", "+_method=x", "_method%00=POST", "%", "%%", "=", "&&",
		"_method", "%20%20.method=DELETE&a=%zz", "\x00method=1", "_method%00%zz=DELETE", "%20_method=1", "[method=1",
		"_methods=1", "_metho=1", "_method%2=1", "%00_method=1", "+%20+.method=1&_method=2",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		var got, want []string
		methodParams(q, func(v string) { got = append(got, v) })
		for pair := range strings.SplitSeq(q, "&") {
			k, v, _ := strings.Cut(pair, "=")
			name := strings.TrimLeft(unescapeLoose(k), " ")
			if i := strings.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if len(name) == len("_method") && name[1:] == "method" && strings.ContainsRune("_. ", rune(name[0])) {
				want = append(want, unescapeLoose(v))
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("methodParams(%q) = %q, want %q", q, got, want)
		}
	})
}

// FuzzParseOrigin: ParseOrigin never panics, and its error never shows
// what stands right before an "@" (a password) or after a "?" (a token).
func FuzzParseOrigin(f *testing.F) {
	for _, s := range []string{
		"https://origin.example", "https://u:SECRET@h", "ftp://h/?a@b&t=SECRET", "https://", "http://[::1]:0/", "%",
		"https:SECRET@x", "https://svc:0/SECRET@origin.example", "https://h:0/?t=SECRET", "svc:SECRET@h",
		"https://u:SECRET@h ", "https://svc:0/SECRET@origin.example ", "https://h:0/?t=SECRET ", "https://svc:0/x SECRET@h",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, err := ParseOrigin(s)
		if err == nil {
			return
		}
		if strings.Count(s, "SECRET") != 1 {
			// Elsewhere too ("SECRET@SECRET0", whose host the error
			// may name): the error's SECRET could be that one.
			return
		}
		_, query, q := strings.Cut(s, "?")
		if (strings.Contains(s, "SECRET@") || q && strings.Contains(query, "SECRET")) && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("ParseOrigin(%q): the error shows the secret: %v", s, err)
		}
	})
}

package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestInvalidFixtures parses every testdata/invalid/NAME.json and expects
// exactly the message in NAME.err. Under GOOS=js, where the Worker's own
// parser (jsonv's scan) reads the document and words its syntax errors,
// NAME.js.err holds the start of the message instead, where there is one.
func TestInvalidFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 40 {
		t.Fatalf("found %d fixtures, want at least 40", len(files))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			doc, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(strings.TrimSuffix(f, ".json") + ".err")
			if err != nil {
				t.Fatalf("every fixture needs its message: %v", err)
			}
			c, err := Parse(doc)
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", c)
			}
			if prefix, jsErr := os.ReadFile(strings.TrimSuffix(f, ".json") + ".js.err"); jsErr == nil && runtime.GOOS == "js" {
				if got, want := err.Error(), strings.TrimSpace(string(prefix)); !strings.HasPrefix(got, want) {
					t.Errorf("error\n got %s\nwant %s...", got, want)
				}
				if !errors.Is(err, ErrSyntax) {
					t.Errorf("error %v is not ErrSyntax", err)
				}
				return
			}
			if got, want := err.Error(), strings.TrimSpace(string(want)); got != want {
				t.Errorf("error\n got %s\nwant %s", got, want)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("error %T is not a *FieldError", err)
			}
		})
	}
}

func TestErrorKinds(t *testing.T) {
	tests := []struct {
		fixture string
		kind    error
	}{
		{"unknown_field", ErrUnknownField},
		{"wrong_type_limit", ErrType},
		{"syntax_error", ErrSyntax},
		{"zero_window", ErrRange},
		{"bad_window", ErrDuration},
		{"window_too_long", ErrRange},
		{"cost_path_double_slash", ErrValue},
		{"duplicate_limit_name", ErrDuplicate},
		{"unknown_default_plan", ErrNoPlan},
		{"bad_api_key_hash", ErrKeyHash},
		{"too_many_limits", ErrTooMany},
		{"cost_above_limit", ErrCost},
		{"bad_on_store_error", ErrValue},
		{"empty_plans", ErrEmpty},
		{"bad_limit_name", ErrName},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			doc, err := os.ReadFile("testdata/invalid/" + tt.fixture + ".json")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Parse(doc); !errors.Is(err, tt.kind) {
				t.Errorf("Parse error %v does not match %v", err, tt.kind)
			}
		})
	}
}

func TestDefault(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]int64{"free": {60, 10_000}, "pro": {600, 100_000}, "enterprise": {6_000, 1_000_000}}
	if got := len(c.Plans); got != len(want) {
		t.Fatalf("%d plans, want %d", got, len(want))
	}
	for name, lim := range want {
		p, ok := c.Plans[name]
		if !ok {
			t.Fatalf("no plan %q", name)
		}
		if len(p.Limits) != 2 {
			t.Fatalf("plan %q has %d limits", name, len(p.Limits))
		}
		for i, w := range []struct {
			name   string
			period time.Duration
		}{{"minute", time.Minute}, {"day", 24 * time.Hour}} {
			l := p.Limits[i]
			if l.Name != w.name || l.Limit != lim[i] || l.Period() != w.period || l.IsLocal() {
				t.Errorf("plan %q limit %d = %+v, want %s %d per %s shared", name, i, l, w.name, lim[i], w.period)
			}
		}
	}
	if c.DefaultPlan != "free" || c.OnStoreError != "allow" || c.Timeout() != 50*time.Millisecond ||
		c.Identity.IPv6Prefix != 64 || !reflect.DeepEqual(c.Identity.Headers, []string{"X-API-Key", "Authorization"}) {
		t.Errorf("defaults not filled: %+v", c)
	}
}

func TestParseEmptyIsDefault(t *testing.T) {
	for _, doc := range []string{"", "  \n", "{}"} {
		c, err := Parse([]byte(doc))
		if err != nil {
			t.Fatalf("Parse(%q): %v", doc, err)
		}
		if !reflect.DeepEqual(c, Default()) {
			t.Errorf("Parse(%q) = %+v, want Default()", doc, c)
		}
	}
}

func TestParseExample(t *testing.T) {
	doc, err := os.ReadFile("../examples/config.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.APIKeys["7b340101426eaa6810ee547503b923bfd895a40cd62b1e52686bf8ffaa8d6e36"], "pro"; got != want {
		t.Errorf("api key plan = %q, want %q", got, want)
	}
	if got, want := c.Plans["free"].UpgradeURL, "https://example.com/upgrade"; got != want {
		t.Errorf("upgrade_url = %q, want %q", got, want)
	}
	if l := c.IPLimits[0]; l.Name != "ip-second" || l.Limit != 50 || l.Period() != time.Second || !l.IsLocal() {
		t.Errorf("ip_limits[0] = %+v", l)
	}
	if r := c.Costs[0]; r.Method != "POST" || r.PathPrefix != "/v1/search" || r.Cost != 5 {
		t.Errorf("costs[0] = %+v", r)
	}
}

func TestParseValid(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		check func(t *testing.T, c *Config)
	}{
		{"an integral number is an integer however written", `{"identity": {"ipv6_prefix": 48.0}, "ip_limits": [{"name": "s", "limit": 5e1, "window": "1s"}]}`, func(t *testing.T, c *Config) {
			if c.Identity.IPv6Prefix != 48 || c.IPLimits[0].Limit != 50 {
				t.Errorf("ipv6_prefix = %d, ip_limits[0].limit = %d; want 48, 50", c.Identity.IPv6Prefix, c.IPLimits[0].Limit)
			}
		}},
		{"empty headers mean IP only", `{"identity": {"headers": []}}`, func(t *testing.T, c *Config) {
			if c.Identity.Headers == nil || len(c.Identity.Headers) != 0 {
				t.Errorf("headers = %#v, want empty non-nil", c.Identity.Headers)
			}
		}},
		{"trusted proxies parse as IPs and CIDRs", `{"identity": {"trusted_proxies": ["10.0.0.1", "192.168.0.0/16", "2001:db8::/32", "::ffff:172.16.0.0/108"]}}`, func(t *testing.T, c *Config) {
			var got []string
			for _, p := range c.Identity.Prefixes() {
				got = append(got, p.String())
			}
			want := []string{"10.0.0.1/32", "192.168.0.0/16", "2001:db8::/32", "172.16.0.0/12"}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("prefixes = %v, want %v", got, want)
			}
		}},
		{"an IPv4-mapped CIDR of 96 bits or more is its IPv4 CIDR", `{"identity": {"trusted_proxies": ["::ffff:10.0.0.0/104", "::ffff:192.168.0.0/112", "::ffff:10.0.0.1/128"]}}`, func(t *testing.T, c *Config) {
			var got []string
			for _, p := range c.Identity.Prefixes() {
				got = append(got, p.String())
			}
			if want := []string{"10.0.0.0/8", "192.168.0.0/16", "10.0.0.1/32"}; !reflect.DeepEqual(got, want) {
				t.Errorf("prefixes = %v, want %v", got, want)
			}
		}},
		{"a leading byte order mark", "\ufeff" + `{"shadow": true}`, func(t *testing.T, c *Config) {
			if !c.Shadow {
				t.Errorf("shadow = false, want true")
			}
		}},
		{"store timeout", `{"store_timeout": "250ms", "on_store_error": "deny"}`, func(t *testing.T, c *Config) {
			if c.Timeout() != 250*time.Millisecond || !c.DenyOnStoreError() {
				t.Errorf("timeout %v deny %v", c.Timeout(), c.DenyOnStoreError())
			}
		}},
		{"cost equal to the smallest limit", `{"costs": [{"path_prefix": "/", "cost": 60}]}`, func(t *testing.T, c *Config) {
			if c.Costs[0].Cost != 60 {
				t.Errorf("cost = %d", c.Costs[0].Cost)
			}
		}},
		{"scope defaults to shared", `{"ip_limits": [{"name": "ip", "limit": 10, "window": "1s"}]}`, func(t *testing.T, c *Config) {
			if c.IPLimits[0].Scope != ScopeShared {
				t.Errorf("scope = %q", c.IPLimits[0].Scope)
			}
		}},
		{"window of 366 days", `{"plans": {"free": {"limits": [{"name": "year", "limit": 5, "window": "8784h"}]}}}`, func(t *testing.T, c *Config) {
			if got := c.Plans["free"].Limits[0].Period(); got != MaxWindow {
				t.Errorf("period = %v, want %v", got, MaxWindow)
			}
		}},
		{"path prefixes a cleaned path can match", `{"costs": [{"path_prefix": "/.well-known/", "cost": 2}, {"path_prefix": "/v1/items/", "cost": 2}, {"path_prefix": "/v1/a...b", "cost": 2}, {"path_prefix": "/v1/x.", "cost": 2}]}`, func(t *testing.T, c *Config) {
			if len(c.Costs) != 4 {
				t.Errorf("costs = %+v", c.Costs)
			}
		}},
		{"eight limits", `{"plans": {"free": {"limits": [` + strings.TrimSuffix(strings.Repeat(`{"name": "x", "limit": 1, "window": "1s"},`, 8), ",") + `]}}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := tt.doc
			if tt.check == nil {
				// The eight limits need distinct names.
				for i := range 8 {
					doc = strings.Replace(doc, `"x"`, `"r`+string(rune('0'+i))+`"`, 1)
				}
			}
			c, err := Parse([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if tt.check != nil {
				tt.check(t, c)
			}
		})
	}
}

// TestValidateZeroFields checks that a Config built in code may leave
// defaulted fields zero, and that Validate does not modify it.
func TestValidateZeroFields(t *testing.T) {
	c := &Config{Plans: map[string]Plan{"free": {Limits: []Limit{{Name: "minute", Limit: 10, Window: "1m"}}}}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.DefaultPlan != "" || c.StoreTimeout != "" || c.Identity.Headers != nil || c.Plans["free"].Limits[0].Scope != "" {
		t.Errorf("Validate modified the config: %+v", c)
	}
	d := c.WithDefaults()
	if d.DefaultPlan != "free" || d.StoreTimeout != "50ms" || d.Plans["free"].Limits[0].Scope != ScopeShared {
		t.Errorf("WithDefaults = %+v", d)
	}
	if c.Plans["free"].Limits[0].Scope != "" {
		t.Error("WithDefaults modified the original")
	}
	bad := &Config{Plans: map[string]Plan{"free": {Limits: []Limit{{Name: "minute", Limit: 10, Window: "1m"}}}}, OnStoreError: "maybe"}
	if err := bad.Validate(); err == nil || err.Error() != `config: on_store_error: "maybe": must be "allow" or "deny"` {
		t.Errorf("Validate = %v", err)
	}
}

// TestRawKeyNotEchoed: an api_keys entry that is not a hash is most likely
// a raw key; no error quotes it, whether Parse or Validate finds it.
func TestRawKeyNotEchoed(t *testing.T) {
	const raw = "sk_live_SECRETKEY123"
	plans := map[string]Plan{"free": {Limits: []Limit{{Name: "minute", Limit: 10, Window: "1m"}}}}
	tests := []struct {
		name string
		err  func() error
	}{
		{"parse, plan name", func() error { _, err := Parse([]byte(`{"api_keys": {"` + raw + `": "free"}}`)); return err }},
		{"parse, wrong type", func() error { _, err := Parse([]byte(`{"api_keys": {"` + raw + `": ["free"]}}`)); return err }},
		{"parse, unknown plan", func() error { _, err := Parse([]byte(`{"api_keys": {"` + raw + `": "gold"}}`)); return err }},
		{"validate", func() error { return (&Config{Plans: plans, APIKeys: map[string]string{raw: "free"}}).Validate() }},
		// The entry written the wrong way round, plan → key: the key is
		// then the value, which the error showed to tell the entry.
		{"parse, key and plan swapped", func() error { _, err := Parse([]byte(`{"api_keys": {"free": "` + raw + `"}}`)); return err }},
		{"validate, key and plan swapped", func() error { return (&Config{Plans: plans, APIKeys: map[string]string{"free": raw}}).Validate() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err()
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), "SECRETKEY") {
				t.Errorf("error quotes the raw key: %v", err)
			}
			if !strings.Contains(err.Error(), "api_keys") {
				t.Errorf("error does not name the field: %v", err)
			}
		})
	}
}

func TestParseTooLarge(t *testing.T) {
	doc := make([]byte, MaxSize+1)
	_, err := Parse(doc)
	if !errors.Is(err, ErrRange) {
		t.Errorf("Parse of %d bytes = %v, want ErrRange", len(doc), err)
	}
}

// endless is a document that never ends (/dev/zero, a pipe whose writer
// keeps writing): it counts what was read of it, and fails a read past
// limit rather than go on for ever.
type endless struct{ read, limit int }

func (e *endless) Read(p []byte) (int, error) {
	if e.read >= e.limit {
		return 0, errors.New("read on far past MaxSize")
	}
	n := min(len(p), e.limit-e.read)
	clear(p[:n])
	e.read += n
	return n, nil
}

// TestReadStopsPastMaxSize: Read refuses a document larger than MaxSize
// after reading one byte past it, naming the document and the bound; a
// smaller one parses.
func TestReadStopsPastMaxSize(t *testing.T) {
	r := &endless{limit: 4 * MaxSize}
	_, err := Read(r)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "(document)" || !errors.Is(err, ErrRange) {
		t.Fatalf("Read of an endless document = %v; want ErrRange naming the document", err)
	}
	if got, want := err.Error(), "config: (document): more than 1048576 bytes: a configuration may have at most 1048576 bytes"; got != want {
		t.Errorf("error\n got %s\nwant %s", got, want)
	}
	if r.read > MaxSize+1 {
		t.Errorf("read %d bytes of it, want at most %d", r.read, MaxSize+1)
	}
	c, err := Read(strings.NewReader(`{"shadow": true}`))
	if err != nil || !c.Shadow {
		t.Errorf("Read of a small document = %+v, %v", c, err)
	}
}

// TestSizeBound: a document of exactly MaxSize bytes is a configuration
// to Parse and to Read (a file padded to the bound, say); one byte more is
// refused by both.
func TestSizeBound(t *testing.T) {
	doc := []byte(`{"shadow": true}`)
	doc = append(doc, strings.Repeat(" ", MaxSize-len(doc))...)
	if c, err := Parse(doc); err != nil || !c.Shadow {
		t.Errorf("Parse of %d bytes = %+v, %v; want it parsed", len(doc), c, err)
	}
	if c, err := Read(strings.NewReader(string(doc))); err != nil || !c.Shadow {
		t.Errorf("Read of %d bytes = %+v, %v; want it parsed", len(doc), c, err)
	}
	doc = append(doc, ' ')
	if _, err := Parse(doc); !errors.Is(err, ErrRange) {
		t.Errorf("Parse of %d bytes = %v, want ErrRange", len(doc), err)
	}
	if _, err := Read(strings.NewReader(string(doc))); !errors.Is(err, ErrRange) {
		t.Errorf("Read of %d bytes = %v, want ErrRange", len(doc), err)
	}
}

// failingReader gives a document's start, then fails (a file on a disk
// that fails, a pipe whose writer died).
type failingReader struct {
	start string
	err   error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.start == "" {
		return 0, f.err
	}
	n := copy(p, f.start)
	f.start = f.start[n:]
	return n, nil
}

// TestReadError: a read that fails is the reader's error, not a
// configuration parsed from what was read before it (here one that parses:
// the document's end was lost).
func TestReadError(t *testing.T) {
	cause := errors.New("input/output error")
	c, err := Read(&failingReader{start: `{"shadow": true}`, err: cause})
	if !errors.Is(err, cause) || c != nil {
		t.Fatalf("Read = %+v, %v; want the read error", c, err)
	}
	if got, want := err.Error(), "config: read: input/output error"; got != want {
		t.Errorf("error %q, want %q", got, want)
	}
}

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/invalid/*.json")
	files = append(files, "../examples/config.json")
	for _, name := range files {
		if doc, err := os.ReadFile(name); err == nil {
			f.Add(doc)
		}
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := Parse(doc)
		if err != nil {
			if c != nil {
				t.Fatal("Parse returned a config with an error")
			}
			if !strings.HasPrefix(err.Error(), "config: ") {
				t.Fatalf("error without package prefix: %v", err)
			}
			return
		}
		// A parsed configuration is valid and holds its defaults.
		if err := c.Validate(); err != nil {
			t.Fatalf("parsed config does not validate: %v", err)
		}
		if _, ok := c.Plans[c.DefaultPlan]; !ok {
			t.Fatalf("default plan %q missing", c.DefaultPlan)
		}
		for _, p := range c.Plans {
			for _, l := range p.Limits {
				if l.Period() < time.Second || l.Limit < 1 {
					t.Fatalf("invalid limit accepted: %+v", l)
				}
			}
		}
	})
}

// BenchmarkParse parses examples/config.json. The Worker does this on every
// request (a fresh Go instance each), so run it in Wasm too:
//
//	GOOS=js GOARCH=wasm go test -run '^$' -bench Parse -exec "$(go env GOROOT)/lib/wasm/go_js_wasm_exec" ./config
func BenchmarkParse(b *testing.B) {
	doc, err := os.ReadFile("../examples/config.json")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCORSOrigins: cors_origins takes "*" and origins as browsers send
// them, and names the entry it refuses.
func TestCORSOrigins(t *testing.T) {
	for _, o := range []string{"*", "https://app.example.com", "http://localhost:3000", "https://[::1]:8443", "http://127.0.0.1",
		"https://my_app.example.com", "https://[2001:db8::1]", "https://xn--bcher-kva.example"} {
		if _, err := Parse([]byte(`{"cors_origins": ["` + o + `"]}`)); err != nil {
			t.Errorf("%q: %v", o, err)
		}
	}
	for _, o := range []string{"", "null", "app.example.com", "https://app.example.com/", "https://app.example.com/x",
		"https://App.example.com", "HTTPS://app.example.com", "https://app.example.com:443", "http://a.example:80", "https://a.example:",
		"ftp://a.example", "https://user@a.example", "https://a.example?", "https://a.example?x=1", "https://a.example#f", "https://*.example.com",
		// Never sent so: browsers write IP addresses in their canonical
		// form (::1, 127.0.0.1), and a host in Unicode in Punycode.
		"https://[0:0::1]", "https://[::ABCD]", "http://127.1", "http://127.000.0.1", "http://0x7f.0.0.1", "https://bücher.example"} {
		_, err := Parse([]byte(`{"cors_origins": ["*", "` + o + `"]}`))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "cors_origins[1]" {
			t.Errorf("%q: %v, want an error naming cors_origins[1]", o, err)
		}
	}
}

package config

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"testing"
)

func roundTrip(t *testing.T, c *Config) []byte {
	t.Helper()
	b, err := c.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	var d Config
	if err := d.UnmarshalBinary(b); err != nil {
		t.Fatalf("UnmarshalBinary: %v", err)
	}
	if !reflect.DeepEqual(&d, c) {
		t.Fatalf("round trip:\n got %#v\nwant %#v", d, *c)
	}
	// Equal Configs give equal bytes (map entries in key order).
	again, _ := d.AppendBinary(nil)
	if !bytes.Equal(again, b) {
		t.Fatalf("re-encoding differs")
	}
	return b
}

func TestBinaryRoundTrip(t *testing.T) {
	doc, err := os.ReadFile("../examples/config.json")
	if err != nil {
		t.Fatal(err)
	}
	example, err := Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*Config{
		"zero":    {},
		"default": Default(),
		"example": example,
		"empty, not nil": {Plans: map[string]Plan{"p": {Limits: []Limit{}}}, APIKeys: map[string]string{},
			Identity: Identity{Headers: []string{}, TrustedProxies: []string{}}, IPLimits: []Limit{}, Costs: []Cost{}},
		"negative and large": {Identity: Identity{IPv6Prefix: -1}, Costs: []Cost{{Cost: -1 << 62}},
			IPLimits: []Limit{{Name: "n", Limit: 1<<63 - 1}}},
	} {
		t.Run(name, func(t *testing.T) { roundTrip(t, c) })
	}
}

// filledConfig returns a Config whose every field is set, to a value of its
// own, through reflection.
func filledConfig(t *testing.T) *Config {
	t.Helper()
	n := 0
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		n++
		switch v.Kind() {
		case reflect.String:
			v.SetString("s" + strconv.Itoa(n))
		case reflect.Int, reflect.Int64:
			v.SetInt(int64(n) * 1000003)
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Struct:
			for i := range v.NumField() {
				fill(v.Field(i))
			}
		case reflect.Slice:
			s := reflect.MakeSlice(v.Type(), 2, 2)
			for i := range 2 {
				fill(s.Index(i))
			}
			v.Set(s)
		case reflect.Map:
			m := reflect.MakeMap(v.Type())
			for range 2 {
				k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
				fill(k)
				fill(e)
				m.SetMapIndex(k, e)
			}
			v.Set(m)
		default:
			t.Fatalf("a field of kind %s: teach AppendBinary and this test", v.Kind())
		}
	}
	var c Config
	fill(reflect.ValueOf(&c).Elem())
	return &c
}

// TestBinaryCoversEveryField: a field added to Config and not to
// AppendBinary fails here.
func TestBinaryCoversEveryField(t *testing.T) {
	c := *filledConfig(t)
	roundTrip(t, &c)
	// And a change to any one byte of the encoding is seen (an error or
	// another Config), never a panic.
	b, _ := c.AppendBinary(nil)
	for i := range b {
		m := bytes.Clone(b)
		m[i] ^= 0x41
		var d Config
		if err := d.UnmarshalBinary(m); err == nil && reflect.DeepEqual(&d, &c) {
			t.Errorf("byte %d changed, same Config", i)
		}
	}
}

// TestBinaryVersion pins the layout of binaryVersion: the SHA-256 of a
// Config with every field set. A change of the layout (a field added,
// moved or encoded otherwise) fails here until binaryVersion changes with
// it, so that no reader takes a form of another layout for its own (the
// Worker keeps the form in its isolate's globals). Bump binaryVersion,
// then pin the new layout's hash.
func TestBinaryVersion(t *testing.T) {
	const version, layout = 3, "13088a6790d84d4e3930a303bce7c159d41690467d270937d8722a28a2dcf4af"
	b, err := filledConfig(t).AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%x", sha256.Sum256(b))
	switch {
	case binaryVersion == version && got != layout:
		t.Errorf("the binary layout changed (sha256 %s, version %d pinned %s): bump binaryVersion", got, version, layout)
	case binaryVersion != version:
		t.Errorf("binaryVersion %d: pin its layout, sha256 %s", binaryVersion, got)
	}
}

func TestUnmarshalBinaryRefuses(t *testing.T) {
	b, _ := Default().AppendBinary(nil)
	for n := range len(b) { // every truncation
		var d Config
		if err := d.UnmarshalBinary(b[:n]); !errors.Is(err, ErrBinary) {
			t.Fatalf("first %d of %d bytes: %v, want ErrBinary", n, len(b), err)
		}
	}
	var d Config
	if err := d.UnmarshalBinary(append(bytes.Clone(b), 0)); !errors.Is(err, ErrBinary) {
		t.Errorf("a byte too many: %v, want ErrBinary", err)
	}
	if err := d.UnmarshalBinary(append([]byte{binaryVersion + 1}, b[1:]...)); !errors.Is(err, ErrBinary) {
		t.Errorf("another version: %v, want ErrBinary", err)
	}
	// A huge length is refused before anything is allocated for it.
	if err := d.UnmarshalBinary([]byte{binaryVersion, 0xff, 0xff, 0xff, 0xff, 0x0f}); !errors.Is(err, ErrBinary) {
		t.Errorf("huge length: %v, want ErrBinary", err)
	}
	if !reflect.DeepEqual(d, Config{}) {
		t.Errorf("a refused input changed the Config: %#v", d)
	}
}

// FuzzBinary: any configuration Parse accepts survives the binary form
// (the other targets' seeds, fuzzSeeds, seed it: with only the one below,
// no configuration that sets every field was ever written), and
// UnmarshalBinary never panics on bytes of any kind.
func FuzzBinary(f *testing.F) {
	fuzzSeeds(f)
	f.Add([]byte(`{"plans": {"free": {"limits": [{"name": "minute", "limit": 60, "window": "1m"}]}}, "default_plan": "free"}`))
	f.Add([]byte{binaryVersion, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		var d Config
		_ = d.UnmarshalBinary(data)
		if c, err := Parse(data); err == nil {
			roundTrip(t, c)
		}
	})
}

package config

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// readmeSection returns the lines of README.md's "## Configuration"
// section.
func readmeSection(t *testing.T, heading string) []string {
	t.Helper()
	doc, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "## ") {
			in = line == heading
			continue
		}
		if in {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		t.Fatalf("README.md has no section %q", heading)
	}
	return out
}

// referenceRow is one row of the README's configuration reference.
type referenceRow struct {
	field, def, meaning string
}

var codeSpan = regexp.MustCompile("`([^`]*)`")

// referenceTable returns the rows of the table under "## Configuration",
// by field path as written there ("plans.P.limits[i].name").
func referenceTable(t *testing.T) map[string]referenceRow {
	t.Helper()
	rows := map[string]referenceRow{}
	for _, line := range readmeSection(t, "## Configuration") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.SplitN(strings.Trim(line, "|"), " | ", 3)
		if len(cells) != 3 {
			t.Fatalf("reference row without three cells: %s", line)
		}
		m := codeSpan.FindStringSubmatch(cells[0])
		if m == nil {
			t.Fatalf("reference row without a field: %s", line)
		}
		if _, dup := rows[m[1]]; dup {
			t.Errorf("README documents %s twice", m[1])
		}
		rows[m[1]] = referenceRow{field: m[1], def: strings.TrimSpace(cells[1]), meaning: cells[2]}
	}
	if len(rows) < 10 {
		t.Fatalf("found %d reference rows", len(rows))
	}
	return rows
}

// fieldPaths returns the JSON path of every field of t as the README
// writes it: a map's entries as P, a list's elements as [i].
func fieldPaths(prefix string, t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		name := tagName(t.Field(i))
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		out = append(out, path)
		ft := t.Field(i).Type
		switch {
		case ft.Kind() == reflect.Struct:
			out = append(out, fieldPaths(path, ft)...)
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
			out = append(out, fieldPaths(path+".P", ft.Elem())...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, fieldPaths(path+"[i]", ft.Elem())...)
		}
	}
	return out
}

// documentedAt returns the row that documents path: its own, or the
// nearest enclosing field's ("costs" documents costs[i].cost, and
// "ip_limits" says its elements have a plan limit's fields).
func documentedAt(rows map[string]referenceRow, path string) (referenceRow, bool) {
	for p := path; ; {
		if r, ok := rows[p]; ok {
			return r, true
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			return referenceRow{}, false
		}
		p = strings.TrimSuffix(p[:i], ".P")
	}
}

// TestReadmeReferenceMatchesConfig: every row of the README's reference
// names a field Parse accepts, every field Parse accepts is documented
// (by its own row or its enclosing field's), and where a row gives its
// default as a JSON value, it is what Default() holds.
func TestReadmeReferenceMatchesConfig(t *testing.T) {
	rows := referenceTable(t)
	paths := fieldPaths("", reflect.TypeOf(Config{}))
	for field := range rows {
		if !slices.Contains(paths, field) {
			t.Errorf("README documents %s, which is no field of Config", field)
		}
	}
	for _, p := range paths {
		if _, ok := documentedAt(rows, p); !ok && p != "identity" {
			t.Errorf("field %s is not in the README's reference", p)
		}
	}

	// Defaults: the first code span of the default cell, when it is JSON.
	def, err := json.Marshal(Default())
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := json.Unmarshal(def, &tree); err != nil {
		t.Fatal(err)
	}
	for field, r := range rows {
		m := codeSpan.FindStringSubmatch(r.def)
		if m == nil || field == "plans" || strings.Contains(field, ".P") {
			continue // "none", "—", prose, or a per-plan field checked below
		}
		var want any
		if err := json.Unmarshal([]byte(m[1]), &want); err != nil {
			t.Errorf("%s: default %s is not JSON", field, m[1])
			continue
		}
		got := any(tree)
		for _, k := range strings.Split(field, ".") {
			got = got.(map[string]any)[k]
		}
		if got == nil {
			got = []any{} // a nil list is an empty one (no proxies, no origins)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: README's default %s, Default() has %v", field, m[1], got)
		}
	}
	for _, p := range Default().Plans {
		for _, l := range p.Limits {
			if want := strings.Trim(rows["plans.P.limits[i].scope"].def, "`\""); l.Scope != want {
				t.Errorf("default plan's scope %q, README says %q", l.Scope, want)
			}
		}
	}
}

// TestReadmeReferenceBounds: the bounds the reference states are the
// code's.
func TestReadmeReferenceBounds(t *testing.T) {
	rows := referenceTable(t)
	for _, tc := range []struct{ field, text string }{
		{"plans.P.limits", "1 to " + strconv.Itoa(MaxRules) + " limits"},
		{"ip_limits", "Up to " + strconv.Itoa(MaxRules) + " limits"},
		{"plans.P.limits[i].limit", "1 to " + strconv.FormatInt(MaxLimit, 10)},
		{"plans.P.limits[i].window", "at most `" + fmtHours(MaxWindow) + "`"},
		{"identity.ipv6_prefix", strconv.Itoa(MinIPv6Prefix) + " to 128"},
		{"check_token", "at least " + strconv.Itoa(MinCheckToken) + " characters"},
		{"store_timeout", "from `" + MinStoreTimeout.String() + "` to `" + MaxStoreTimeout.String() + "`"},
		{"plans", "1–64 of `A-Z a-z 0-9 . _ -`"},
		{"plans.P.limits[i].name", "1–64 of `A-Z a-z 0-9 . _ -`"},
	} {
		if r := rows[tc.field]; !strings.Contains(r.meaning, tc.text) {
			t.Errorf("README on %s does not say %q: %s", tc.field, tc.text, r.meaning)
		}
	}
}

// docConfigs returns the JSON blocks of the README and docs/*.md that are
// whole configurations (an object whose members are all Config fields),
// by where they are.
func docConfigs(t *testing.T) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	known := tags(reflect.TypeOf(Config{}))
	out := map[string][]byte{}
	for _, f := range append(files, "../README.md") {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(doc), "\n")
		for i := 0; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) != "```json" {
				continue
			}
			start := i + 1
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			}
			block := []byte(strings.Join(lines[start:i], "\n"))
			var members map[string]json.RawMessage
			if json.Unmarshal(block, &members) != nil || len(members) == 0 {
				continue // an answer, an excerpt with "...", not a configuration
			}
			whole := true
			for k := range members {
				whole = whole && slices.Contains(known, k)
			}
			if whole {
				out[filepath.Base(f)+":"+strconv.Itoa(start)] = block
			}
		}
	}
	return out
}

// TestDocConfigsParse: every configuration shown in the README and the
// docs parses and validates (a placeholder for a key's hash is replaced by
// a hash), and so do the examples.
func TestDocConfigsParse(t *testing.T) {
	docs := docConfigs(t)
	if len(docs) == 0 {
		t.Fatal("no configuration found in README.md or docs/")
	}
	examples, err := filepath.Glob("../examples/*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range examples {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs[filepath.Base(f)] = b
	}
	hash := strings.Repeat("ab", 32)
	for at, doc := range docs {
		t.Run(at, func(t *testing.T) {
			doc = bytes.ReplaceAll(doc, []byte("<sha256 hex of the key>"), []byte(hash))
			if _, err := Parse(doc); err != nil {
				t.Errorf("%v\n%s", err, doc)
			}
		})
	}
}

// TestReadmeConfigSetsEveryField: the README's full configuration sets
// every field (so says its introduction), with the defaults where the
// table gives one.
func TestReadmeConfigSetsEveryField(t *testing.T) {
	var full []byte
	for at, doc := range docConfigs(t) {
		if strings.HasPrefix(at, "README.md:") && bytes.Contains(doc, []byte(`"cors_origins"`)) {
			full = bytes.ReplaceAll(doc, []byte("<sha256 hex of the key>"), []byte(strings.Repeat("ab", 32)))
		}
	}
	if full == nil {
		t.Fatal("README.md has no configuration that sets every field")
	}
	var tree map[string]any
	if err := json.Unmarshal(full, &tree); err != nil {
		t.Fatal(err)
	}
	for _, p := range fieldPaths("", reflect.TypeOf(Config{})) {
		// A limit's fields are shown once, in a plan's limits or in
		// ip_limits (scope).
		alt := strings.Replace(p, "plans.P.limits[i]", "ip_limits[i]", 1)
		if !setIn(tree, strings.Split(p, ".")) && !setIn(tree, strings.Split(alt, ".")) {
			t.Errorf("README's full configuration does not set %s", p)
		}
	}
	c, err := Parse(full)
	if err != nil {
		t.Fatal(err)
	}
	d := Default()
	for name, p := range c.Plans {
		p.UpgradeURL = ""
		if !reflect.DeepEqual(p, d.Plans[name]) {
			t.Errorf("README's plan %s = %+v, the default is %+v", name, p, d.Plans[name])
		}
	}
	c.Plans, c.APIKeys, c.IPLimits, c.Costs = d.Plans, d.APIKeys, d.IPLimits, d.Costs
	c.Identity.TrustedProxies, c.CORSOrigins = nil, nil
	if !reflect.DeepEqual(c, d) {
		t.Errorf("README's full configuration = %+v, defaults %+v", c, d)
	}
}

// setIn reports whether the decoded JSON tree sets the field at path,
// whose "P" and "[i]" parts stand for any entry or element (at least one
// must set it).
func setIn(v any, path []string) bool {
	if len(path) == 0 {
		return true
	}
	head, list := strings.CutSuffix(path[0], "[i]")
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	var next []any
	if head == "P" {
		for _, e := range m {
			next = append(next, e)
		}
	} else if e, ok := m[head]; ok {
		next = []any{e}
	}
	for _, e := range next {
		if list {
			a, _ := e.([]any)
			for _, x := range a {
				if setIn(x, path[1:]) {
					return true
				}
			}
			continue
		}
		if setIn(e, path[1:]) {
			return true
		}
	}
	return false
}

// TestWranglerConfigParses: the configuration wrangler.toml ships in
// [vars] (a TOML literal string, taken as it is) parses and validates, and
// keeps a per-second guard local (a shared one is per isolate in effect on
// Workers KV, docs/edge.md).
func TestWranglerConfigParses(t *testing.T) {
	toml, err := os.ReadFile("../wrangler.toml")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(toml), "\nSLIDEGATE_CONFIG = '''\n")
	if !ok {
		t.Fatal("wrangler.toml sets no SLIDEGATE_CONFIG = '''...''' in [vars]")
	}
	doc, _, ok := strings.Cut(rest, "'''")
	if !ok {
		t.Fatal("wrangler.toml: SLIDEGATE_CONFIG's string does not end")
	}
	c, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range c.IPLimits {
		if l.Period() < 25*time.Second && !l.IsLocal() {
			t.Errorf("ip_limits %s of %s is shared", l.Name, l.Window)
		}
	}
}

// TestReadmeErrorExample: the error the Configuration section quotes is
// the one Parse gives for that value.
func TestReadmeErrorExample(t *testing.T) {
	const quoted = "`config: plans.free.limits[1].window: \"0s\": must be at least 1s`"
	if !strings.Contains(strings.Join(readmeSection(t, "## Configuration"), "\n"), quoted) {
		t.Fatalf("README's Configuration section no longer quotes %s", quoted)
	}
	_, err := Parse([]byte(`{"plans": {"free": {"limits": [{"name": "minute", "limit": 60, "window": "1m"}, {"name": "day", "limit": 10000, "window": "0s"}]}}}`))
	if err == nil || "`"+err.Error()+"`" != quoted {
		t.Errorf("Parse error %v, README quotes %s", err, quoted)
	}
}

// stringConsts returns the string constants declared in a Go file.
func stringConsts(t *testing.T, file string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out[name.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
	}
	return out
}

// TestWranglerNamesWhatEdgeReads: wrangler.toml sets, in [vars], the
// variables the Worker reads (edge/app.go), and binds its KV namespace
// under the name the Worker asks for: a renamed variable would leave the
// Worker on the default plans, or without an origin, with wrangler deploy
// succeeding.
func TestWranglerNamesWhatEdgeReads(t *testing.T) {
	names := stringConsts(t, "../edge/app.go")
	toml, err := os.ReadFile("../wrangler.toml")
	if err != nil {
		t.Fatal(err)
	}
	_, vars, ok := strings.Cut(string(toml), "\n[vars]\n")
	if !ok {
		t.Fatal("wrangler.toml has no [vars]")
	}
	if i := strings.Index(vars, "\n["); i >= 0 {
		vars = vars[:i]
	}
	for _, c := range []string{"varConfig", "varOrigin"} {
		if names[c] == "" || !strings.Contains(vars, "\n"+names[c]+" = ") {
			t.Errorf("wrangler.toml's [vars] does not set %s (%q), which the Worker reads", c, names[c])
		}
	}
	if b := names["kvBinding"]; b == "" || !strings.Contains(string(toml), "\n[[kv_namespaces]]\nbinding = \""+b+"\"\n") {
		t.Errorf("wrangler.toml binds no KV namespace as %q, which the Worker reads", b)
	}
}

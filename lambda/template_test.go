package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
)

// templatePath is the SAM template at the module root.
var templatePath = filepath.Join("..", "template.yaml")

// decode turns a YAML node into maps, slices and strings, with the
// CloudFormation short forms spelled out: !Ref x is {"Ref": x}, !GetAtt a.b
// is {"Fn::GetAtt": [a, b]}, any other !Fn is {"Fn::Fn": value}.
func decode(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		return decode(n.Content[0])
	case yaml.AliasNode:
		return decode(n.Alias)
	}
	var v any
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i < len(n.Content); i += 2 {
			val, err := decode(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[n.Content[i].Value] = val
		}
		v = m
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			val, err := decode(c)
			if err != nil {
				return nil, err
			}
			s = append(s, val)
		}
		v = s
	case yaml.ScalarNode:
		v = n.Value
	default:
		return nil, fmt.Errorf("line %d: unexpected YAML node kind %v", n.Line, n.Kind)
	}
	if !strings.HasPrefix(n.Tag, "!") || strings.HasPrefix(n.Tag, "!!") {
		return v, nil
	}
	fn := strings.TrimPrefix(n.Tag, "!")
	switch fn {
	case "Ref", "Condition":
		return map[string]any{fn: v}, nil
	case "GetAtt":
		if s, ok := v.(string); ok {
			res, attr, _ := strings.Cut(s, ".")
			return map[string]any{"Fn::GetAtt": []any{res, attr}}, nil
		}
	}
	return map[string]any{"Fn::" + fn: v}, nil
}

func parseTemplate(data []byte) (map[string]any, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, err
	}
	v, err := decode(&root)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("template is not a mapping")
	}
	return m, nil
}

// at walks a decoded template by keys (maps) and indices (slices); nil when
// the path does not exist.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			s, ok := v.([]any)
			if !ok || k >= len(s) {
				return nil
			}
			v = s[k]
		}
	}
	return v
}

// resources returns the logical ids of the resources of type typ.
func resources(tpl map[string]any, typ string) []string {
	var ids []string
	res, _ := tpl["Resources"].(map[string]any)
	for id, r := range res {
		if at(r, "Type") == typ {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

func same(a, b any) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// checkTemplate lists where tpl disagrees with the code: the table's key and
// TTL attribute (dynamostore), the function's environment (this package),
// its policy (dynamostore.Actions on this table only), runtime and build,
// and that its logs expire.
func checkTemplate(tpl map[string]any) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }

	tables := resources(tpl, "AWS::DynamoDB::Table")
	if len(tables) != 1 {
		return append(bad, fmt.Sprintf("want one AWS::DynamoDB::Table, got %v", tables))
	}
	tid := tables[0]
	table := at(tpl, "Resources", tid, "Properties")
	if got := at(table, "BillingMode"); got != "PAY_PER_REQUEST" {
		fail("table BillingMode %v, want PAY_PER_REQUEST (on demand)", got)
	}
	if got, want := at(table, "KeySchema"), []any{map[string]any{"AttributeName": dynamostore.KeyAttribute, "KeyType": "HASH"}}; !same(got, want) {
		fail("table KeySchema %v, want %v", got, want)
	}
	if got, want := at(table, "AttributeDefinitions"), []any{map[string]any{"AttributeName": dynamostore.KeyAttribute, "AttributeType": "S"}}; !same(got, want) {
		fail("table AttributeDefinitions %v, want %v", got, want)
	}
	if got, want := at(table, "TimeToLiveSpecification"), map[string]any{"AttributeName": dynamostore.TTLAttribute, "Enabled": "true"}; !same(got, want) {
		fail("table TimeToLiveSpecification %v, want %v", got, want)
	}
	// What deleting the stack or replacing the table does to the counters is
	// a choice the template states (cfn-lint I3011), not CloudFormation's
	// silent default.
	for _, policy := range []string{"DeletionPolicy", "UpdateReplacePolicy"} {
		if got := at(tpl, "Resources", tid, policy); got != "Delete" && got != "Retain" {
			fail("table %s %v, want Delete or Retain, stated", policy, got)
		}
	}

	fns := resources(tpl, "AWS::Serverless::Function")
	if len(fns) != 1 {
		return append(bad, fmt.Sprintf("want one AWS::Serverless::Function, got %v", fns))
	}
	fn := at(tpl, "Resources", fns[0])
	props := at(fn, "Properties")
	for k, want := range map[string]any{"Runtime": "provided.al2023", "Handler": "bootstrap", "Architectures": []any{"arm64"}} {
		if got := at(props, k); !same(got, want) {
			fail("function %s %v, want %v", k, got, want)
		}
	}
	if got := at(fn, "Metadata", "BuildMethod"); got != "go1.x" && got != "makefile" {
		fail("function Metadata.BuildMethod %v, want go1.x or makefile", got)
	}
	if got, _ := at(props, "CodeUri").(string); filepath.Clean(got) != "lambda" {
		fail("function CodeUri %q, want lambda/ (this package)", got)
	}
	vars, _ := at(props, "Environment", "Variables").(map[string]any)
	var names []string
	for k := range vars {
		names = append(names, k)
	}
	slices.Sort(names)
	wantEnv := []string{EnvConfig, EnvOrigin, EnvTable}
	slices.Sort(wantEnv)
	if !slices.Equal(names, wantEnv) {
		fail("function environment %v, want %v", names, wantEnv)
	}
	if got, want := vars[EnvTable], map[string]any{"Ref": tid}; !same(got, want) {
		fail("%s = %v, want %v", EnvTable, got, want)
	}

	var statements []any
	policies, _ := at(props, "Policies").([]any)
	for _, p := range policies {
		st, ok := at(p, "Statement").([]any)
		if !ok {
			fail("policy %v: want inline statements (a managed policy grants more than the store calls)", p)
			continue
		}
		statements = append(statements, st...)
	}
	var actions []string
	for _, st := range statements {
		if at(st, "Effect") != "Allow" {
			continue
		}
		as, ok := at(st, "Action").([]any)
		if !ok {
			as = []any{at(st, "Action")}
		}
		for _, a := range as {
			actions = append(actions, fmt.Sprint(a))
		}
		if got, want := at(st, "Resource"), map[string]any{"Fn::GetAtt": []any{tid, "Arn"}}; !same(got, want) {
			fail("policy resource %v, want the table only: %v", got, want)
		}
	}
	slices.Sort(actions)
	want := slices.Clone(dynamostore.Actions)
	slices.Sort(want)
	if !slices.Equal(actions, want) {
		fail("policy actions %v, want exactly %v", actions, want)
	}

	// Lambda's own log group (/aws/lambda/<name>) keeps every line, client
	// addresses included, for ever, and stays behind when the stack goes.
	logs, _ := at(props, "LoggingConfig", "LogGroup", "Ref").(string)
	if got := at(tpl, "Resources", logs, "Type"); got != "AWS::Logs::LogGroup" {
		fail("function LoggingConfig.LogGroup %v, want a !Ref of the template's AWS::Logs::LogGroup", at(props, "LoggingConfig"))
	} else if days, err := strconv.Atoi(fmt.Sprint(at(tpl, "Resources", logs, "Properties", "RetentionInDays"))); err != nil || days < 1 {
		fail("log group %s RetentionInDays %v, want a number of days", logs, at(tpl, "Resources", logs, "Properties", "RetentionInDays"))
	}
	// An HTTP API that gives up before the function does answers its own
	// 503, without the origin's answer or slidegate's 504 and rate-limit
	// fields; SAM's documented default for an HttpApi event is 5 s.
	timeout, err := strconv.Atoi(fmt.Sprint(at(props, "Timeout")))
	if err != nil {
		fail("function Timeout %v, want a number of seconds", at(props, "Timeout"))
	}
	events, _ := at(props, "Events").(map[string]any)
	for name, ev := range events {
		if at(ev, "Type") != "HttpApi" {
			continue
		}
		ms, err := strconv.Atoi(fmt.Sprint(at(ev, "Properties", "TimeoutInMillis")))
		if err != nil || ms > 30000 || ms < min(timeout*1000, 30000) {
			fail("HttpApi event %s TimeoutInMillis %v, want it stated, at most 30000 and at least the function's Timeout (%d s)", name, at(ev, "Properties", "TimeoutInMillis"), timeout)
		}
	}
	if at(props, "FunctionUrlConfig") == nil && at(props, "Events") == nil {
		fail("function has neither a Function URL nor an HTTP API event")
	}
	for _, o := range []string{"ApiUrl", "FunctionUrl", "TableName"} {
		if at(tpl, "Outputs", o, "Value") == nil {
			fail("output %s missing", o)
		}
	}
	if got, want := at(tpl, "Outputs", "TableName", "Value"), map[string]any{"Ref": tid}; !same(got, want) {
		fail("output TableName %v, want %v", got, want)
	}
	return bad
}

// loadTemplate reads and decodes template.yaml.
func loadTemplate(tb testing.TB) map[string]any {
	tb.Helper()
	data, err := os.ReadFile(templatePath)
	if err != nil {
		tb.Fatal(err)
	}
	tpl, err := parseTemplate(data)
	if err != nil {
		tb.Fatalf("template.yaml: %v", err)
	}
	return tpl
}

func TestTemplateAgreesWithCode(t *testing.T) {
	tpl := loadTemplate(t)
	for _, p := range checkTemplate(tpl) {
		t.Error(p)
	}
	if got, want := at(tpl, "Outputs", "FunctionUrl", "Value"), map[string]any{"Fn::GetAtt": []any{"SlidegateFunctionUrl", "FunctionUrl"}}; !same(got, want) {
		t.Errorf("FunctionUrl output %v, want %v (!GetAtt decoded)", got, want)
	}
	if got, _ := at(tpl, "Outputs", "ApiUrl", "Value", "Fn::Sub").(string); !strings.Contains(got, "${ServerlessHttpApi}") {
		t.Errorf("ApiUrl output %q, want a !Sub of the HTTP API's id", got)
	}
}

// TestTemplateCheckCatches edits the template the way a drift would and
// expects the check to name it.
func TestTemplateCheckCatches(t *testing.T) {
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, old, new, want string }{
		{"ttl attribute", "AttributeName: ttl", "AttributeName: expires", "TimeToLiveSpecification"},
		{"key attribute", "- AttributeName: id\n          KeyType", "- AttributeName: pk\n          KeyType", "KeySchema"},
		{"wildcard action", "- dynamodb:GetItem", "- dynamodb:*", "policy actions"},
		{"extra action", "- dynamodb:GetItem", "- dynamodb:GetItem\n                - dynamodb:Scan", "policy actions"},
		{"any resource", "Resource: !GetAtt CountersTable.Arn", `Resource: "*"`, "policy resource"},
		{"env name", "TABLE_NAME: !Ref", "TABLE: !Ref", "function environment"},
		{"runtime", "Runtime: provided.al2023", "Runtime: provided.al2", "Runtime"},
		{"arch", "- arm64", "- x86_64", "Architectures"},
		{"deletion policy", "    DeletionPolicy: Delete\n", "", "DeletionPolicy"},
		{"replace policy", "    UpdateReplacePolicy: Delete\n", "", "UpdateReplacePolicy"},
		{"log group", "      LoggingConfig:\n        LogGroup: !Ref SlidegateLogs\n", "", "LoggingConfig"},
		{"log retention", "      RetentionInDays: 30\n", "", "RetentionInDays"},
		{"http api timeout", "            TimeoutInMillis: 30000\n", "", "TimeoutInMillis"},
		{"http api timeout short", "TimeoutInMillis: 30000", "TimeoutInMillis: 5000", "TimeoutInMillis"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(string(data), tt.old) {
				t.Fatalf("template has no %q to edit", tt.old)
			}
			tpl, err := parseTemplate([]byte(strings.Replace(string(data), tt.old, tt.new, 1)))
			if err != nil {
				t.Fatal(err)
			}
			problems := checkTemplate(tpl)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tt.want) }) {
				t.Errorf("edit %q -> %q: problems %q, want one about %s", tt.old, tt.new, problems, tt.want)
			}
		})
	}
}

// originURLCases are OriginUrl values with whether the parameter's
// AllowedPattern admits them; ParseOrigin, which setup calls, admits the
// same ones.
var originURLCases = []struct {
	value string
	ok    bool
}{
	{"", true}, // the check API only
	{"https://api.example.com", true},
	{"https://api.example.com/", true},
	{"http://10.0.0.7:8080/base/path", true},
	{"https://[2001:db8::1]:8443/", true},
	{"https://[::1]", true},
	{"https://api.example.com/v1?tenant=a", true},
	{"https://api.example.com:", false}, // an empty port: an unset variable, refused by the parser
	{"https://api.example.com:65535/", true},
	// Unicode white space, pasted from a page or a chat: the parser
	// refuses it (the path went to /v1%C2%A0/...), so the pattern must.
	{"https://api.example.com/v1\u00a0", false},
	{"https://api.example.com\u00a0", false},
	{"https://api.example.com/a\u3000b", false},
	{"https://api.example.com/\u2028", false},
	{"https://api.example.com/\u0085", false},
	{"https://caf\u00e9.example/", true}, // non-ASCII that is no space stays
	// Invisible (format) characters: a zero-width space from a page, a
	// byte order mark, a soft hyphen, a bidi control. The parser refuses
	// them (the path went to /v1%E2%80%8B/...).
	{"https://api.example.com/v1\u200b", false},
	{"https://api.example.com\u200b", false},
	{"https://api.example.com/\ufeff", false},
	{"https://api.example.com/v1\u00ad", false},
	{"https://api.example.com/?q=\u202e", false},
	{"https://api.example.com/\u2060", false},
	{"https://api.example.com/files/%e2%82%ac", true},
	{"https://bücher.example", true},
	{"api.example.com", false}, // no scheme
	{"api.example.com/v1", false},
	{"ftp://api.example.com", false},
	{"https://user:secret@api.example.com", false},
	// An @ outside user info (found by a seventh review): Go reads
	// the first as host deploy with the password in the path.
	{"https://deploy:4242/pw@origin.example.com", false},
	{"https://api.example.com/users/@me", false},
	{"https://api.example.com/v1?notify=ops@example.com", false},
	{"https://api.example.com/users/%40me", true},
	{"https://", false},
	{"https:///path", false},
	{" https://api.example.com", false},
	{"https://api.example.com ", false},
	{"self", false}, // the Worker's, not the Lambda's
	// Typos in the port, a stray %, a broken IPv6 literal: the pattern
	// admitted them, the deployment succeeded, and every instance's
	// init failed.
	{"https://api.example.com:80800", false},
	{"https://api.example.com:65536", false},
	{"https://api.example.com:0", false},
	{"https://api.example.com:https", false},
	{"https://:8080", false},
	{"https://api.example.com:443:443", false},
	{"https://api.example.com/100%", false},
	{"https://api.example.com/a%zz", false},
	{"https://api.example.com#%zz", false},
	{"https://api.example.com/\x7f", false},
	{"https://api.example.com\\x", false},
	{"https://api%20example.com", false},
	{"https://[::1", false},
	{"https://[1.2.3.4]", false},
	{"https://[1:2:3:4:5:6:7:8:9]", false},
}

// originPattern compiles OriginUrl's AllowedPattern.
func originPattern(tb testing.TB) *regexp.Regexp {
	tb.Helper()
	src, _ := at(loadTemplate(tb), "Parameters", "OriginUrl", "AllowedPattern").(string)
	if src == "" {
		tb.Fatal("OriginUrl has no AllowedPattern")
	}
	re, err := regexp.Compile(src)
	if err != nil {
		tb.Fatalf("OriginUrl AllowedPattern %q: %v", src, err)
	}
	return re
}

// TestOriginURLPattern: the OriginUrl parameter's AllowedPattern refuses at
// deploy time the ORIGIN_URL mistakes that would otherwise fail every
// instance's init (setup's ErrOrigin) after a successful deployment, and
// admits what ParseOrigin admits in the documented forms. (CloudFormation
// matches the whole value, as the anchored pattern does here.)
func TestOriginURLPattern(t *testing.T) {
	re := originPattern(t)
	for _, tt := range originURLCases {
		t.Run(tt.value, func(t *testing.T) {
			if got := re.MatchString(tt.value); got != tt.ok {
				t.Errorf("AllowedPattern matches %q: %v, want %v", tt.value, got, tt.ok)
			}
			if tt.value == "" {
				return
			}
			_, err := httpapi.ParseOrigin(tt.value)
			if (err == nil) != tt.ok {
				t.Errorf("httpapi.ParseOrigin(%q) error %v: the pattern and setup disagree", tt.value, err)
			}
		})
	}
}

// FuzzOriginURLPattern: every value the AllowedPattern admits, ParseOrigin
// admits too. (The pattern may refuse more: an upper-case scheme, an
// IPv4-mapped or zoned IPv6 literal, a host with characters no DNS name
// has, a bad escape in the query.)
func FuzzOriginURLPattern(f *testing.F) {
	re := originPattern(f)
	for _, tt := range originURLCases {
		f.Add(tt.value)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if s == "" || !re.MatchString(s) {
			return
		}
		if _, err := httpapi.ParseOrigin(s); err != nil {
			t.Errorf("AllowedPattern admits %q, which setup refuses: %v", s, err)
		}
	})
}

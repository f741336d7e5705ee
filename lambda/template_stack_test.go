package main

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// samGenerated returns the logical ids SAM's transform makes for the
// template's functions that the template may refer to: each function's
// Function URL and role, and the implicit HTTP API when a function has an
// HttpApi event (SAM makes none without one).
func samGenerated(tpl map[string]any) []string {
	var ids []string
	for _, fn := range resources(tpl, "AWS::Serverless::Function") {
		ids = append(ids, fn+"Url", fn+"Role")
		events, _ := at(tpl, "Resources", fn, "Properties", "Events").(map[string]any)
		for _, e := range events {
			if at(e, "Type") == "HttpApi" && !slices.Contains(ids, "ServerlessHttpApi") {
				ids = append(ids, "ServerlessHttpApi")
			}
		}
	}
	return ids
}

// refTargets returns every name the template refers to, by where: !Ref x,
// !GetAtt x.attr, and ${x} or ${x.attr} in !Sub.
func refTargets(v any, at string, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			switch k {
			case "Ref":
				if s, ok := e.(string); ok {
					out[s] = at
				}
			case "Fn::GetAtt":
				if l, ok := e.([]any); ok && len(l) > 0 {
					out[fmt.Sprint(l[0])] = at
				}
			case "Fn::Sub":
				s, _ := e.(string)
				for _, m := range regexp.MustCompile(`\$\{([^}!]+)\}`).FindAllStringSubmatch(s, -1) {
					name, _, _ := strings.Cut(m[1], ".")
					out[name] = at
				}
			}
			refTargets(e, at+"."+k, out)
		}
	case []any:
		for i, e := range v {
			refTargets(e, fmt.Sprintf("%s[%d]", at, i), out)
		}
	}
}

// TestTemplateReferencesExist: every !Ref, !GetAtt and !Sub of
// template.yaml names a parameter, a resource, one SAM makes for the
// function, or a pseudo parameter; CloudFormation refuses the stack
// otherwise, which no test here would have seen (cfn-lint does, when it is
// installed).
func TestTemplateReferencesExist(t *testing.T) {
	tpl := loadTemplate(t)
	targets := map[string]string{}
	refTargets(tpl, "", targets)
	if len(targets) < 5 {
		t.Fatalf("found %d references in template.yaml: %v", len(targets), targets)
	}
	for _, p := range unresolved(tpl) {
		t.Error(p)
	}
}

// unresolved names each reference of tpl (!Ref, !GetAtt, !Sub) to
// something that is no parameter, resource, resource SAM makes for it
// (samGenerated) or pseudo parameter, with where it stands.
func unresolved(tpl map[string]any) []string {
	known := samGenerated(tpl)
	for _, section := range []string{"Parameters", "Resources"} {
		m, _ := tpl[section].(map[string]any)
		for k := range m {
			known = append(known, k)
		}
	}
	targets := map[string]string{}
	refTargets(tpl, "", targets)
	var bad []string
	for name, where := range targets {
		if !slices.Contains(known, name) && !strings.HasPrefix(name, "AWS::") {
			bad = append(bad, fmt.Sprintf("%s refers to %q, which the template does not define", where, name))
		}
	}
	slices.Sort(bad)
	return bad
}

// TestTemplateOneFrontEnd: docs/lambda.md tells an operator who needs only
// one of the two front ends which parts of template.yaml make the other,
// to delete them; what is left must still deploy. It named only the
// function URL's parts, and an operator who deleted the HTTP API (the
// function's HttpApi event) kept the ApiUrl output, whose
// ${ServerlessHttpApi} then names nothing: CloudFormation refused the
// stack.
func TestTemplateOneFrontEnd(t *testing.T) {
	doc, err := os.ReadFile("../docs/lambda.md")
	if err != nil {
		t.Fatal(err)
	}
	// The sentence that says what to delete, from "delete the other" to
	// the end of its parenthesis, white space collapsed.
	text := strings.Join(strings.Fields(string(doc)), " ")
	_, says, ok := strings.Cut(text, "delete the other from the template")
	if !ok {
		t.Fatal(`docs/lambda.md no longer says "delete the other from the template"`)
	}
	says, _, _ = strings.Cut(says, ").")
	tpl0 := loadTemplate(t)
	fn := resources(tpl0, "AWS::Serverless::Function")
	if len(fn) != 1 {
		t.Fatalf("want one function, got %v", fn)
	}
	perms := resources(tpl0, "AWS::Lambda::Permission")
	for _, c := range []struct {
		name      string
		named     []string // what docs/lambda.md must name of it
		resources []string
		outputs   []string
		event     string // an event of the function
		left      int    // references left unresolved
	}{
		{name: "function URL", named: []string{"`SlidegateFunctionUrl`", "two permissions", "`FunctionUrl` output"},
			resources: append([]string{"SlidegateFunctionUrl"}, perms...), outputs: []string{"FunctionUrl"}},
		{name: "HTTP API", named: []string{"`HttpApi` event", "`ApiUrl` output"},
			outputs: []string{"ApiUrl"}, event: "HttpApi"},
		// What docs/lambda.md said of the HTTP API before: nothing, so
		// the event alone went.
		{name: "HTTP API's event alone", event: "HttpApi", left: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, n := range c.named {
				if !strings.Contains(says, n) {
					t.Errorf("docs/lambda.md does not name the %s's %s among what to delete: %q", c.name, n, says)
				}
			}
			tpl := loadTemplate(t)
			for _, id := range c.resources {
				delete(tpl["Resources"].(map[string]any), id)
			}
			for _, id := range c.outputs {
				delete(tpl["Outputs"].(map[string]any), id)
			}
			if c.event != "" {
				events, _ := at(tpl, "Resources", fn[0], "Properties", "Events").(map[string]any)
				if _, ok := events[c.event]; !ok {
					t.Fatalf("the function has no event %s", c.event)
				}
				delete(events, c.event)
			}
			if bad := unresolved(tpl); len(bad) != c.left {
				t.Errorf("without the %s, %d references unresolved, want %d: %v", c.name, len(bad), c.left, bad)
			}
		})
	}
	if len(perms) != 2 {
		t.Errorf("docs/lambda.md counts the function URL's two permissions; the template has %v", perms)
	}
}

// TestTemplateParametersAsDocumented: each parameter of template.yaml is
// used, as the function's environment variable docs/lambda.md pairs it
// with: SLIDEGATE_CONFIG set from OriginUrl (or a parameter left unused)
// deploys without a word, and every instance then fails its init.
func TestTemplateParametersAsDocumented(t *testing.T) {
	tpl := loadTemplate(t)
	doc, err := os.ReadFile("../docs/lambda.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\s*\\| `([A-Za-z]+)` \\| `([A-Z_]+)` \\|")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = m[2]
	}
	params, _ := tpl["Parameters"].(map[string]any)
	if len(params) == 0 {
		t.Fatal("template.yaml has no Parameters")
	}
	fn := resources(tpl, "AWS::Serverless::Function")
	if len(fn) != 1 {
		t.Fatalf("want one function, got %v", fn)
	}
	vars, _ := at(tpl, "Resources", fn[0], "Properties", "Environment", "Variables").(map[string]any)
	for p := range params {
		env, ok := documented[p]
		if !ok {
			t.Errorf("parameter %s is not in docs/lambda.md's table of parameters", p)
			continue
		}
		if got, want := vars[env], map[string]any{"Ref": p}; !same(got, want) {
			t.Errorf("%s = %v, want %v (docs/lambda.md)", env, got, want)
		}
	}
	for p := range documented {
		if _, ok := params[p]; !ok {
			t.Errorf("docs/lambda.md documents parameter %s, which template.yaml does not have", p)
		}
	}
}

// TestTemplateOutputsLogGroup: the stack names the function's log group in
// its outputs, and docs/lambda.md lists every output. The function logs to
// the template's log group (LoggingConfig), under a name CloudFormation
// makes up, and Lambda's /aws/lambda/<function name> is never made: an
// operator following the docs looked there for the denials and errors.
func TestTemplateOutputsLogGroup(t *testing.T) {
	tpl := loadTemplate(t)
	fn := resources(tpl, "AWS::Serverless::Function")
	if len(fn) != 1 {
		t.Fatalf("want one function, got %v", fn)
	}
	group := at(tpl, "Resources", fn[0], "Properties", "LoggingConfig", "LogGroup")
	if got := at(tpl, "Outputs", "LogGroup", "Value"); group == nil || !same(got, group) {
		t.Errorf("output LogGroup %v, want the function's log group %v", got, group)
	}
	doc, err := os.ReadFile("../docs/lambda.md")
	if err != nil {
		t.Fatal(err)
	}
	outputs, _ := tpl["Outputs"].(map[string]any)
	for o := range outputs {
		if !strings.Contains(string(doc), "| `"+o+"` |") {
			t.Errorf("docs/lambda.md's table of outputs has no %s", o)
		}
	}
}

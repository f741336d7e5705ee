package main

import (
	"fmt"
	"slices"
	"testing"
)

// noFunctionURLs are the regions where Lambda has no function URLs: the
// Lambda guide's list ("Invoking Lambda function URLs") and those cfn-lint's
// resource specification lacks AWS::Lambda::Url in (cfn-lint --regions
// ALL_REGIONS).
var noFunctionURLs = []string{
	"ap-east-2", "ap-south-2", "ap-southeast-4", "ap-southeast-5", "ap-southeast-6", "ap-southeast-7",
	"ca-west-1", "cn-northwest-1", "eu-central-2", "eu-south-2", "il-central-1", "me-central-1",
	"mx-central-1", "us-gov-east-1", "us-gov-west-1",
}

// condition evaluates the condition expression c of tpl in region: the
// functions a template's Conditions section may use, on AWS::Region and
// literals.
func condition(tpl map[string]any, c any, region string) (bool, error) {
	value := func(v any) string {
		if at(v, "Ref") == "AWS::Region" {
			return region
		}
		return fmt.Sprint(v)
	}
	m, ok := c.(map[string]any)
	if !ok || len(m) != 1 {
		return false, fmt.Errorf("condition %v: want one function", c)
	}
	for fn, arg := range m {
		args, _ := arg.([]any)
		switch fn {
		case "Condition":
			return condition(tpl, at(tpl, "Conditions", fmt.Sprint(arg)), region)
		case "Fn::Equals":
			if len(args) != 2 {
				return false, fmt.Errorf("Fn::Equals %v: want two values", arg)
			}
			return value(args[0]) == value(args[1]), nil
		case "Fn::Not":
			if len(args) != 1 {
				return false, fmt.Errorf("Fn::Not %v: want one condition", arg)
			}
			b, err := condition(tpl, args[0], region)
			return !b, err
		case "Fn::Or", "Fn::And":
			if len(args) < 2 || len(args) > 10 {
				return false, fmt.Errorf("%s with %d conditions: CloudFormation takes 2 to 10", fn, len(args))
			}
			for _, a := range args {
				b, err := condition(tpl, a, region)
				if err != nil || b == (fn == "Fn::Or") {
					return b, err
				}
			}
			return fn == "Fn::And", nil
		}
		return false, fmt.Errorf("condition function %s not evaluated here", fn)
	}
	panic("unreachable")
}

// TestTemplateFunctionURLByRegion: in a region without function URLs the
// stack leaves the function URL, its permissions and its output out, and
// keeps the rest; CloudFormation refused the whole stack there (an unknown
// AWS::Lambda::Url). Elsewhere the URL is what SAM's FunctionUrlConfig made:
// public, with both permissions Lambda requires of a public URL.
func TestTemplateFunctionURLByRegion(t *testing.T) {
	tpl := loadTemplate(t)
	fns := resources(tpl, "AWS::Serverless::Function")
	if len(fns) != 1 {
		t.Fatalf("want one AWS::Serverless::Function, got %v", fns)
	}
	fn := fns[0]
	if at(tpl, "Resources", fn, "Properties", "FunctionUrlConfig") != nil {
		t.Errorf("%s has a FunctionUrlConfig: SAM makes its URL in every region", fn)
	}
	urls := resources(tpl, "AWS::Lambda::Url")
	if len(urls) != 1 {
		t.Fatalf("want one AWS::Lambda::Url, got %v", urls)
	}
	// SAM's names (aws-sam-translator: the function's logical id and
	// Url, UrlPublicPermissions, URLInvokeAllowPublicAccess): under another
	// name CloudFormation would delete a stack's URL and make a new one,
	// at another address.
	if got, want := urls[0], fn+"Url"; got != want {
		t.Errorf("the AWS::Lambda::Url is %s, want %s, the name FunctionUrlConfig gave it", got, want)
	}
	ref := map[string]any{"Ref": fn}
	if got, want := at(tpl, "Resources", urls[0], "Properties"), map[string]any{"AuthType": "NONE", "InvokeMode": "BUFFERED", "TargetFunctionArn": ref}; !same(got, want) {
		t.Errorf("%s properties %v, want %v", urls[0], got, want)
	}
	// Each the way SAM makes it (FunctionUrlConfig with AuthType NONE):
	// without the second, the URL answers every request with a 403.
	public := []struct {
		name  string
		props map[string]any
	}{
		{fn + "UrlPublicPermissions", map[string]any{"Action": "lambda:InvokeFunctionUrl", "FunctionName": ref, "FunctionUrlAuthType": "NONE", "Principal": "*"}},
		{fn + "URLInvokeAllowPublicAccess", map[string]any{"Action": "lambda:InvokeFunction", "FunctionName": ref, "InvokedViaFunctionUrl": "true", "Principal": "*"}},
	}
	conditioned := map[string]any{urls[0]: at(tpl, "Resources", urls[0], "Condition")}
	for _, want := range public {
		found := ""
		for _, id := range resources(tpl, "AWS::Lambda::Permission") {
			if same(at(tpl, "Resources", id, "Properties"), want.props) {
				found = id
			}
		}
		if found == "" {
			t.Errorf("no AWS::Lambda::Permission %v", want.props)
			continue
		}
		if found != want.name {
			t.Errorf("the AWS::Lambda::Permission %v is %s, want %s, the name FunctionUrlConfig gave it", want.props, found, want.name)
		}
		conditioned[found] = at(tpl, "Resources", found, "Condition")
	}
	conditioned["output FunctionUrl"] = at(tpl, "Outputs", "FunctionUrl", "Condition")

	for _, region := range append([]string{"us-east-1", "eu-west-1", "eu-central-1", "ap-southeast-2", "cn-north-1"}, noFunctionURLs...) {
		want := !slices.Contains(noFunctionURLs, region)
		for what, name := range conditioned {
			if name == nil {
				t.Errorf("%s has no Condition", what)
				delete(conditioned, what)
				continue
			}
			got, err := condition(tpl, map[string]any{"Condition": name}, region)
			if err != nil {
				t.Fatalf("%s: condition %v: %v", what, name, err)
			}
			if got != want {
				t.Errorf("%s in %s: condition %v is %v, want %v", what, region, name, got, want)
			}
		}
	}
}

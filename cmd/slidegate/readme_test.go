package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore/dynamostore"
)

// readmeCommandLine returns the README's "## Command line" section.
func readmeCommandLine(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Command line\n")
	if !ok {
		t.Fatal("README.md has no section \"## Command line\"")
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	return section
}

// TestReadmeNamesDynamoDBActions: the README's Command line section names
// every DynamoDB action `serve --store dynamodb --create-table` calls: the
// table's (dynamostore.TableAPI: CreateTable, DescribeTable while it waits
// for the table, UpdateTimeToLive) and the store's (dynamostore.Actions).
// An operator who granted what it listed, CreateTable and UpdateTimeToLive,
// got "describe table: ... AccessDeniedException" and no server.
func TestReadmeNamesDynamoDBActions(t *testing.T) {
	section := strings.Join(strings.Fields(readmeCommandLine(t)), " ")
	api := reflect.TypeFor[dynamostore.TableAPI]()
	want := []string{}
	for i := range api.NumMethod() {
		want = append(want, "dynamodb:"+api.Method(i).Name)
	}
	want = append(want, dynamostore.Actions...)
	for _, action := range want {
		t.Run(action, func(t *testing.T) {
			if !strings.Contains(section, "`"+action+"`") {
				t.Errorf("README's Command line section does not name %s, which serve --store dynamodb --create-table calls", action)
			}
		})
	}
}

// TestReadmeServeFlags: every flag of serve is in the README's synopsis,
// and where the Command line section gives a flag's default ("`--listen`
// (default `127.0.0.1:8080`"), it is the flag's.
func TestReadmeServeFlags(t *testing.T) {
	section := readmeCommandLine(t)
	var help bytes.Buffer
	if err := serve(context.Background(), []string{"-h"}, io.Discard, &help); err != nil {
		t.Fatal(err)
	}
	flagLine := regexp.MustCompile(`(?m)^  -([a-z-]+)`)
	defaultOf := regexp.MustCompile(`\(default "?([^")]*)"?\)\s*$`)
	lines := strings.Split(help.String(), "\n")
	synopsis, _, _ := strings.Cut(section, "```\n\n")
	found := 0
	for i, line := range lines {
		m := flagLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		found++
		name := m[1]
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(synopsis, "--"+name) {
				t.Errorf("README's synopsis has no --%s", name)
			}
			d := defaultOf.FindStringSubmatch(lines[i+1])
			j := strings.Index(section, "`--"+name+"`")
			if d == nil || j < 0 {
				return
			}
			near := section[j:min(len(section), j+80)]
			_, said, ok := strings.Cut(near, "(default ")
			if !ok {
				return
			}
			said = strings.NewReplacer("`", "", ",", "").Replace(strings.FieldsFunc(said, func(r rune) bool { return r == ';' || r == ')' || r == ' ' })[0])
			if got, err := time.ParseDuration(d[1]); err == nil {
				if want, err := time.ParseDuration(said); err != nil || want != got {
					t.Errorf("README gives --%s the default %q, the flag's is %s", name, said, got)
				}
				return
			}
			if said != d[1] {
				t.Errorf("README gives --%s the default %q, the flag's is %q", name, said, d[1])
			}
		})
	}
	if found < 10 {
		t.Fatalf("found %d flags in serve -h:\n%s", found, help.String())
	}
}

package main

import (
	"os"
	"reflect"
	"strings"
	"testing"

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

package dynamostore_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/slidegate/slidegate/kvstore/dynamostore"
)

// TestActionsAreTheAPI: API, the only way the Store and Probe (the
// Lambda's cold start) reach DynamoDB, has one method per action of
// Actions, the Lambda's policy, and no other. TestConformance sees the
// requests of the paths the suite takes, on dynalite only; this holds for
// every path, without it: a method added to API and left out of Actions
// would be refused by IAM on AWS alone.
func TestActionsAreTheAPI(t *testing.T) {
	api := reflect.TypeFor[dynamostore.API]()
	var methods []string
	for i := range api.NumMethod() {
		methods = append(methods, "dynamodb:"+api.Method(i).Name)
	}
	actions := slices.Sorted(slices.Values(dynamostore.Actions))
	if slices.Sort(methods); !slices.Equal(methods, actions) {
		t.Errorf("API's methods are %v, Actions %v: want the same", methods, actions)
	}
}

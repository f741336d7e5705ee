// Command lambda is slidegate on AWS Lambda: the shared HTTP handler
// (package httpapi) behind API Gateway HTTP API (payload format 2.0) and
// Lambda Function URL events, with its counters in DynamoDB (package
// dynamostore). Built as bootstrap for the provided.al2023 runtime:
//
//	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -o bin/lambda/bootstrap ./lambda
//
// The environment configures it:
//
//	SLIDEGATE_CONFIG  the configuration, JSON (see package config); empty means the defaults
//	TABLE_NAME        the DynamoDB table of the counters; required
//	ORIGIN_URL        the origin admitted requests are proxied to; empty serves
//	                  the check API (POST /v1/check) and /healthz only
//
// and the AWS SDK's own variables (region, credentials from the function's
// role; AWS_ENDPOINT_URL_DYNAMODB points it at a local server in tests).
//
// main builds the handler once per instance and hands it to aws-lambda-go;
// every HTTP outcome, a 429, a 400 or a 5xx, is an HTTP response, never an
// invocation error.
package main

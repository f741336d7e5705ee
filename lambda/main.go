package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	h, err := setup(context.Background(), os.Getenv, os.Stderr)
	if err != nil {
		// An init error: Lambda reports it and retries the instance.
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lambda.Start(Adapt(h))
}

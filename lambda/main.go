package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	limitMemory(os.Getenv)
	h, err := setup(context.Background(), os.Getenv, os.Stderr)
	if err != nil {
		// An init error: Lambda reports it and retries the instance.
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Adapt logs a handler's panic through the default logger: JSON
	// lines, as the handler's own.
	slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, nil)))
	lambda.Start(Adapt(h))
}

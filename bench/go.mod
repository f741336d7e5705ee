module github.com/slidegate/slidegate/bench

go 1.26.0

require (
	github.com/sethvargo/go-limiter v0.7.1
	github.com/slidegate/slidegate v0.0.0
	github.com/ulule/limiter/v3 v3.11.2
	golang.org/x/time v0.16.0
)

require (
	github.com/dunglas/httpsfv v1.1.2 // indirect
	github.com/pkg/errors v0.9.1 // indirect
)

replace github.com/slidegate/slidegate => ../

# Each target is a command you can run by hand. `make test` is what CI runs.
GO      ?= go
WRANGLER = npx --no-install wrangler

.PHONY: test bench run accuracy build-edge dev-edge deploy-edge build-lambda deploy-lambda fuzz lint-template

# The Worker's own JSON parser (internal/jsonv), its promise glue (internal/jsasync), the isolate's
# cells (kvstore/workerskv), the config fixtures and the limiter's js-only default store also run
# in Node.
WASM_EXEC = $$($(GO) env GOROOT)/lib/wasm/go_js_wasm_exec

test:
	$(GO) vet ./... && GOOS=js GOARCH=wasm $(GO) vet ./edge ./internal/jsonv ./internal/jsasync ./kvstore/workerskv ./limiter \
	&& $(GO) test -race -count=1 ./... \
	&& GOOS=js GOARCH=wasm $(GO) test -count=1 -exec="$(WASM_EXEC)" ./internal/jsonv ./internal/jsasync ./config ./kvstore/workerskv \
	&& GOOS=js GOARCH=wasm $(GO) test -count=1 -exec="$(WASM_EXEC)" -run '^TestNoStoreInJS$$' ./limiter \
	&& cd bench && $(GO) vet ./... && $(GO) test -count=1 ./...

# Every fuzz target for FUZZTIME each, one at a time (`make fuzz FUZZTIME=5m`).
FUZZTIME ?= 30s
fuzz:
	for p in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$p | grep '^Fuzz'); do \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$p || exit 1; \
		done; \
	done

# What CloudFormation and SAM's transform would refuse at deploy time. cfn-lint is a Python
# tool (pip install cfn-lint), so it is not part of `make test`, whose tools CI installs.
lint-template:
	cfn-lint template.yaml

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./window ./limiter ./kvstore/... && cd bench && $(GO) test -run '^$$' -bench . -benchmem ./...

run:
	$(GO) run ./cmd/slidegate serve --config examples/config.json --listen 127.0.0.1:8080 --demo-origin

accuracy:
	$(GO) run ./cmd/accuracy -out docs

build-edge:
	$(GO) run github.com/syumai/workers/cmd/workers-assets-gen -mode=go && GOOS=js GOARCH=wasm $(GO) build -trimpath -ldflags='-s -w' -o build/app.wasm ./edge \
		&& $(GO) run ./edge/cmd/wasmpack build/app.wasm

dev-edge:
	WRANGLER_SEND_METRICS=false $(WRANGLER) dev --ip 127.0.0.1 --port 8787

deploy-edge:
	WRANGLER_SEND_METRICS=false $(WRANGLER) deploy

build-lambda:
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' -o bin/lambda/bootstrap ./lambda

deploy-lambda:
	CGO_ENABLED=0 GOFLAGS="-tags=lambda.norpc -trimpath -ldflags=-s" sam build && sam deploy --guided

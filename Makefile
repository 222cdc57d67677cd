# Developer shortcuts. CI runs `bash .ci/run` (= make ci).

GO ?= go
GOBIN_DIR := $(shell $(GO) env GOBIN)
ifeq ($(GOBIN_DIR),)
GOBIN_DIR := $(firstword $(subst :, ,$(shell $(GO) env GOPATH)))/bin
endif
STATICCHECK := $(GOBIN_DIR)/staticcheck

.PHONY: test lint fmt ci run bench

test:
	$(GO) test -race ./...

lint: $(STATICCHECK)
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

$(STATICCHECK):
	$(GO) install honnef.co/go/tools/cmd/staticcheck@latest

fmt:
	gofmt -w .

ci:
	bash .ci/run

run:
	$(GO) run ./cmd/agentapi serve

bench:
	$(GO) run ./bench

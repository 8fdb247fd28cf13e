# distlock: build and test entry points (see ARCHITECTURE.md, "Tests and tools").
#
#   make test           gofmt check + go vet + go test -race in every module of
#                       go.work, against throwaway redis/PostgreSQL/NATS servers
#                       (installed via apt when missing and run as root on Debian);
#                       6 modules test at a time (DISTLOCK_TEST_JOBS=1: one by one),
#                       and make release-check as one more job beside them
#   make release-check  every module tidy, requiring its siblings at one release
#                       version, and fetchable with go get from a throwaway module
#                       proxy by a module outside the workspace, where a program
#                       per backend builds without another backend's driver
#   make vet | fmt      go vet / gofmt -l check only, no servers
#   make bench          benchmarks in every module, against throwaway servers
#   make services-up    start servers in .services/ for local work, then:
#                           source .services/env && (cd redislock && go test ./...)
#   make services-down  stop them
#
# The logic lives in scripts/ (plain bash; release-check runs the Go program
# tests/cmd/release), so each target is a command or two, and the servers are
# always stopped by scripts/test.sh's EXIT trap, even on failure.

SERVICES_DIR := .services

.DEFAULT_GOAL := test
.PHONY: test release-check vet fmt bench services-up services-down

test:
	scripts/test.sh test

release-check:
	scripts/release-check.sh

vet:
	scripts/test.sh vet

fmt:
	scripts/test.sh fmt

bench:
	scripts/test.sh bench

services-up:
	scripts/services.sh start $(SERVICES_DIR)
	@echo "servers are up; use them with: source $(SERVICES_DIR)/env"

services-down:
	scripts/services.sh stop $(SERVICES_DIR)
	rm -rf $(SERVICES_DIR)

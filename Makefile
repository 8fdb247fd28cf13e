# distlock: build and test entry points (DESIGN.md section 6).
#
#   make test           gofmt check + go vet + go test -race in every module of
#                       go.work, against throwaway redis/PostgreSQL/NATS servers
#                       (installed via apt when missing and run as root on Debian);
#                       4 modules test at a time (DISTLOCK_TEST_JOBS=1: one by one)
#   make vet | fmt      go vet / gofmt -l check only, no servers
#   make bench          benchmarks in every module, against throwaway servers
#   make services-up    start servers in .services/ for local work, then:
#                           source .services/env && (cd redislock && go test ./...)
#   make services-down  stop them
#
# The logic lives in scripts/ (plain bash), so each target is one command and
# the servers are always stopped by the script's EXIT trap, even on failure.

SERVICES_DIR := .services

.DEFAULT_GOAL := test
.PHONY: test vet fmt bench services-up services-down

test:
	scripts/test.sh test

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

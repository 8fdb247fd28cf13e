#!/usr/bin/env bash
# make release-check: whether the modules, as they are in the working tree,
# can be released at the version they require of each other. Fails unless
# every module can be fetched with go get from a throwaway module proxy by a
# module outside the workspace, builds there, and pulls in no other backend's
# driver, and unless go install github.com/distlock/distlock/cmd/distlock@VERSION
# works there (GOWORK=off); the package doc of tests/cmd/release lists every
# check.
#
#   scripts/release-check.sh [-keep]   -keep: keep the throwaway proxy and modules
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec go run ./tests/cmd/release check "$@"

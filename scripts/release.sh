#!/usr/bin/env bash
# Prepares a release of distlock's modules (see CONTRIBUTING.md, "Releasing").
#
#   scripts/release.sh VERSION    e.g. scripts/release.sh v0.2.0
#
# Sets every requirement of one distlock module by another, in every module
# of go.work, to VERSION (the replace directives to the sibling directories
# stay), and go.work's replacements of the siblings cmd/distlock requires
# (it has no replace directive: go install refuses one), then prints the
# tags to push: <module>/VERSION for each published
# module. Every module of go.work is published except examples and tests
# (tests/cmd/release, "unpublished"). It creates no tag and no commit.
set -euo pipefail

if [[ $# -ne 1 ]]; then
	echo "usage: $0 VERSION   (e.g. v0.2.0)" >&2
	exit 2
fi
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec go run ./tests/cmd/release bump "$1"

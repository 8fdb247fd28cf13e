module github.com/distlock/distlock/core

go 1.26.0

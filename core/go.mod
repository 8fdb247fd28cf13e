module github.com/distlock/distlock/core

go 1.24

// Package tests holds distlock's cross-backend, multi-process and fault tests.
package tests

// Package election is work in progress.
package election

// Package polllease is work in progress.
package polllease

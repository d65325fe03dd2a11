// Package cited is what cited.go and its C helper cited.c do.
package cited

// Package memory finds what a plan needs of each memory (Of): the
// persistent buffers, the peak of temporaries the plan lets be live at
// once, and one arena per memory into which the temporaries are packed,
// two of them sharing bytes only where the plan orders every use of one
// before every use of the other.
package memory

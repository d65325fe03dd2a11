// Package plan holds what a planner makes: a Plan (streams, one global
// submission order of steps, events, the figures every plan reports, and
// what its memories need), and its forms for people (WriteText,
// WritePasses) and programs (MarshalJSON). Package planner makes plans and
// names these types too; its sub-packages share them from here.
package plan

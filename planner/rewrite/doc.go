// Package rewrite changes the work of a graph before the planner places
// it: Fuse makes a gemm and the launches that finish its output one gemm
// with an epilogue; Split cuts a pipeline's exposed ends into row blocks
// that overlap. Each returns the new graph, the declared ops each of its
// ops runs (planner.Plan.Parts, which the verifier checks the plan
// against), and a line for the plan's pass log. The planner's fuse and
// split passes call them.
package rewrite

// Package verify checks a plan against its graph independently of how the
// planner made it (Verify): every conflicting pair of ops and every
// dependency ordered by stream order and waits, every wait after its
// record, allocations before and frees after every use, temporaries that
// share arena bytes ordered, and bodies of loops and branches within their
// fork and join. Its failures are *Error values with a Kind and the ops
// involved.
package verify

package dag

// BruteForceDeps is bruteForceDeps for the tests of package dag_test.
var BruteForceDeps = bruteForceDeps

# Tests of kernels/.

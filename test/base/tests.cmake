# Tests of base/.

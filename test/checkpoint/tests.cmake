# Tests of checkpoint/.

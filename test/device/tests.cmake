# Tests of device/.

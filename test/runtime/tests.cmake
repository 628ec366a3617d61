# Tests of runtime/.

# Sources of runtime/.

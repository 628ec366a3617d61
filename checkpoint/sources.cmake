# Sources of checkpoint/.

"""The runner's side: starting the measured processes, driving valgrind, the stages and the baseline gate."""

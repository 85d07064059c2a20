# Helpers for the comparison scripts (sourced, not run).

# The time(us) column of the last row a perf program prints (hmc-perf, hmc-gloo-allreduce).
time_of() { grep -v '^#' | grep -v 'hmc\[' | awk 'NF >= 8 { print $5 }' | tail -1; }

# median_of FILE COLUMN: the median of one column of a whitespace-separated file.
median_of() {
  awk -v c="$2" '{ print $c }' "$1" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

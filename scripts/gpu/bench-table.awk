# The table of the multi-GPU benchmark logs: the median of each
# benchmark's metric (GB/s, busGB/s or us/call) and its ratio to the raw
# floor of the same run: "rate" for GB/s, "time" for us/call. A
# .../session benchmark is held to its .../raw sibling; replays without a
# raw replay of their own are held to the eager raw loop, and shown beside
# it too. Usage: awk -f bench-table.awk LOG...

function isort(a, m,   i, j, t) { for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t } }
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	for (i = 3; i < NF; i++) if ($(i+1) == "GB/s" || $(i+1) == "busGB/s" || $(i+1) == "us/call" || $(i+1) == "us/replay") {
		if (!(name in unit)) order[++n] = name
		unit[name] = $(i+1); v[name] = v[name] " " $i
	}
}
END {
	printf "%-58s %12s %10s %14s\n", "benchmark", "median", "unit", "vs raw floor"
	for (j = 1; j <= n; j++) {
		k = order[j]; m = split(v[k], a, " "); isort(a, m)
		med[k] = (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
	}
	for (j = 1; j <= n; j++) {
		k = order[j]; ratio = ""
		if (k ~ /\/(session|binding)$/) {
			raw = k; sub(/\/(session|binding)$/, "/raw", raw)
			eraw = raw; sub(/\/replay\/raw$/, "/eager/raw", eraw)
			if (!(raw in med)) raw = eraw
			if (raw in med && med[raw] > 0) ratio = sprintf("%.3fx %s", med[k] / med[raw], unit[k] ~ /^us\// ? "time" : "rate")
			if (eraw != raw && med[eraw] > 0) ratio = ratio sprintf(" (%.3fx the eager raw loop)", med[k] / med[eraw])
		}
		printf "%-58s %12.3f %10s %14s\n", k, med[k], unit[k], ratio
	}
}

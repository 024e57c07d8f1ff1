#!/usr/bin/env bash
# Draws validation loss against cumulative WAN bytes (log scale) for every run
# of one setting in bench_convergence's convergence.tsv, with the data's loss
# floor. Usage: bench/convergence/plot.sh DIR [SETTING]
#   DIR      holds convergence.tsv (bench_convergence --out DIR); the PNG goes there
#   SETTING  default "3 regions, non-iid"
set -euo pipefail
dir=${1:?usage: plot.sh DIR [SETTING]}
setting=${2:-3 regions, non-iid}
tsv="$dir/convergence.tsv"
[ -f "$tsv" ] || { echo "plot.sh: $tsv not found (run bench_convergence --out $dir)" >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot missing (deploy/install-deps.sh installs gnuplot-nox)" >&2; exit 2; }

runs=$(awk -F'\t' -v s="$setting" '!/^#/ && $2 == s { print $1 }' "$tsv" | sort -un)
[ -n "$runs" ] || { echo "plot.sh: no runs for setting '$setting' in $tsv" >&2; exit 2; }
floor=$(awk -F'\t' -v s="$setting" '!/^#/ && $2 == s { print $7; exit }' "$tsv")

plots=()
for r in $runs; do
  title=$(awk -F'\t' -v r="$r" '!/^#/ && $1 == r { print $3; exit }' "$tsv")
  plots+=("'$tsv' using (\$1 == $r ? \$5 : 1/0):6 with linespoints pt 7 ps 0.6 title '$title'")
done
if awk -v f="$floor" 'BEGIN { exit !(f > 0) }'; then
  plots+=("$floor with lines dashtype 2 lc rgb 'black' title 'loss floor (entropy rate)'")
fi
joined=$(IFS=,; echo "${plots[*]}")

gnuplot <<GP
set terminal pngcairo size 1200,900 font ",11"
set output '$dir/convergence.png'
set datafile separator "\t"
set datafile commentschars "#"
set title "bench_convergence: validation loss vs WAN bytes ($setting, equal compute)" noenhanced
set xlabel "cumulative WAN bytes sent (all regions)"
set ylabel "validation loss (nats/byte)"
set logscale x
set format x "10^{%L}"
set grid
set key outside center bottom vertical maxrows 9 font ",10"
plot $joined
GP
echo "wrote $dir/convergence.png"

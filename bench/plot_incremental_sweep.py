#!/usr/bin/env python3
"""Plots `bench_incremental --sweep` output: save time vs the fraction of
rows changed, full save vs delta save, with gnuplot (as `varstate bench`
draws its plots).

    python3 bench/plot_incremental_sweep.py RESULT.json OUT.png [TITLE]
"""
import json
import os
import subprocess
import sys
import tempfile


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    with open(argv[1]) as f:
        result = json.load(f)
    title = argv[3] if len(argv) > 3 else (
        f"Save time vs rows changed: {result['table_mib']} MiB of embedding tables "
        f"({result['tables']} x {result['rows_per_table']} rows of {result['row_bytes']} bytes)")
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "sweep.dat")
        with open(data, "w") as f:
            for p in result["sweep"]:
                f.write(f"{100 * p['fraction']} {p['full_save_s']} {p['delta_save_s']}\n")
        script = os.path.join(tmp, "sweep.gp")
        with open(script, "w") as f:
            f.write(f"""set terminal pngcairo noenhanced size 960,600 font 'sans,10'
set output '{argv[2]}'
set title '{title}'
set xlabel 'rows changed since the previous save (%, log scale)'
set ylabel 'save time (s, log scale)'
set logscale xy
set grid
set key top left
plot '{data}' using 1:2 with linespoints lw 2 pt 7 title 'full save', \\
     '{data}' using 1:3 with linespoints lw 2 pt 5 title 'incremental (delta) save', \\
     '{data}' using 1:2:(sprintf('%.0fx', $2/$3)) with labels offset 0,-1.2 notitle
""")
        subprocess.run(["gnuplot", script], check=True)


if __name__ == "__main__":
    main(sys.argv)

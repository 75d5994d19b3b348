#!/usr/bin/env python3
"""A/B timing of libfusednorm builds on a noisy machine: one fusednorm-bench binary runs against
each library in turn (LD_LIBRARY_PATH), round after round, so that the machine's drift falls on
every library alike; prints each case's median and minimum time (us) per library.

  python3 tests/bench/ab_libs.py --libs /tmp/libA,/tmp/libB --rounds 4 -- \
      --ops rmsnorm_fp4 --in bf16 --hidden 8192 --tokens 4096 --threads 2 --time 0.4

Each library directory holds a libfusednorm.so.0 (a copy of build/libfusednorm.so.0.1.0).
"""
import argparse
import collections
import os
import statistics
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--libs", required=True, help="comma-separated directories, each with libfusednorm.so.0")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bench", default=os.path.join(os.path.dirname(__file__), "../../build/fusednorm-bench"))
    ap.add_argument("--ignore-status", action="store_true",
                    help="keep going when the bench fails (timing-only builds whose bytes are wrong on purpose)")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="-- then fusednorm-bench's options")
    a = ap.parse_args()
    bench_args = a.args[1:] if a.args[:1] == ["--"] else a.args
    libs = a.libs.split(",")
    times = collections.defaultdict(list)
    for _ in range(a.rounds):
        for lib in libs:
            env = dict(os.environ, LD_LIBRARY_PATH=lib)
            out = subprocess.run([a.bench] + bench_args, env=env, capture_output=True, text=True)
            if out.returncode != 0 and not a.ignore_status:
                sys.exit(f"{lib}: fusednorm-bench exited with {out.returncode}\n{out.stderr}")
            for line in out.stdout.splitlines():
                f = line.split()
                # op mode in out rows cols sets reps us GB/s %copy mismatches
                if len(f) == 12 and not line.startswith("#") and f[0] != "op":
                    times[(" ".join([f[0], f[1], f[2], f[3], f[4] + "x" + f[5]]), lib)].append(float(f[8]))
    for case in sorted({c for c, _ in times}):
        cells = [f"{lib}: med {statistics.median(times[(case, lib)]):9.1f} min {min(times[(case, lib)]):9.1f}"
                 for lib in libs]
        print(case.ljust(52), "  ".join(cells))


if __name__ == "__main__":
    main()

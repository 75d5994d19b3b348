"""Draws fusednorm-bench's JSON lines: % of the copy bandwidth by shape and mode, one panel per operation.

    fusednorm-bench --quick --json > bench.json
    python -m fusednorm.plot bench.json -o bench.png        # the installed package
    python python/fusednorm/plot.py bench.json -o bench.png # a checkout, nothing built

`fusednorm-bench --plot FILE.png` runs this script itself on the run's cases. Each panel is a grid:
a column per shape (rows x cols, in the order the bench ran them), a row per mode (with the input
and output dtypes where they vary), each cell coloured and labelled with the case's % of copy
(GB/s of the bytes the call must move over the copy bandwidth of the same run; 100 = as fast as a
copy). A cell marked "!" had mismatching bytes against the reference, "err" a failed call.

Needs matplotlib (`pip install matplotlib`, or `pip install "fusednorm[plot]"`). Imports nothing from
fusednorm, so it runs from a checkout without the package being built.
"""

import argparse
import json
import sys

# Panel order and titles; other operations follow in the order they appear.
OPS = {"rmsnorm_quant": "rmsnorm_quant", "rmsnorm_fp4": "rmsnorm_fp4", "qk_rmsnorm": "qk_rmsnorm",
       "mla": "mla_rope_rmsnorm_quant"}

CELL_W, CELL_H = 0.62, 0.27  # inches
MISSING_MATPLOTLIB = ("matplotlib is missing for {python}: `{python} -m pip install matplotlib` "
                      "(or pip install 'fusednorm[plot]')")


def fail(message):
    print(f"fusednorm.plot: {message}", file=sys.stderr)
    sys.exit(2)


def read_cases(paths):
    """The bench's case objects from JSON-lines files ("-": stdin); lines that are not cases
    (the --scalar-speedup line, blank lines) are left out."""
    cases = []
    for path in paths:
        try:
            if path == "-":
                text = sys.stdin.read()
            else:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
        except OSError as e:
            fail(f"{path}: {e.strerror}")
        for n, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                case = json.loads(line)
            except json.JSONDecodeError as e:
                fail(f"{path}:{n}: not a JSON line ({e})")
            if isinstance(case, dict) and "op" in case and "pct_of_copy" in case:
                cases.append(case)
    return cases


def shape_label(c):
    if "nq" in c and "nk" in c:
        return f"{c['rows']}\n×({c['nq']}+{c['nk']})"
    if c["op"] == "mla":
        return f"T {c['rows']}\nHq {c.get('heads', '?')}"
    return f"{c['rows']}\n×{c['cols']}"


def series_label(c, vary_in, vary_out, vary_device):
    label = c["mode"]
    if c["op"] == "mla":
        label = f"{label.split(' ')[1]} {c['out_dtype']} cache" if " " in label else label
    else:
        if vary_in:
            label += f" {c['in_dtype']}"
        if vary_out:
            label += f" → {c['out_dtype']}"
    if vary_device:
        label += f" ({c['device']})"
    return label


def panels(cases):
    """[(title, shapes, series, {(series, shape): case})] in the panel order."""
    by_op = {}
    for c in cases:
        by_op.setdefault(c["op"], []).append(c)
    order = [op for op in OPS if op in by_op] + [op for op in by_op if op not in OPS]
    out = []
    for op in order:
        cs = by_op[op]
        vary = lambda key: len({c[key] for c in cs}) > 1  # noqa: E731
        vary_in, vary_out, vary_device = vary("in_dtype"), vary("out_dtype"), vary("device")
        shapes, series, cells = [], [], {}
        for c in cs:
            shape, s = shape_label(c), series_label(c, vary_in, vary_out, vary_device)
            if shape not in shapes:
                shapes.append(shape)
            if s not in series:
                series.append(s)
            cells[(s, shape)] = c
        out.append((OPS.get(op, op), shapes, series, cells))
    return out


def run_summary(cases):
    """One line a device: what ran and the copy bandwidth it is measured against."""
    lines = []
    for device in dict.fromkeys(c["device"] for c in cases):
        c = next(c for c in cases if c["device"] == device)
        what = device
        if device.startswith("cpu"):
            what += f" ({c.get('cpu_target', '?')}, {c.get('threads', '?')} threads)"
        lines.append(f"{what}: copy {c['copy_gbps']:.1f} GB/s")
    return "; ".join(lines)


def draw(cases, out, title, dpi):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import Normalize

    ps = panels(cases)
    cmap, norm = matplotlib.colormaps["RdYlGn"], Normalize(0, 100)
    longest = max(len(s) for _, _, series, _ in ps for s in series)
    left = 0.35 + 0.075 * longest
    # A panel's cells are as wide as its longest shape label needs.
    cell_w = [max(CELL_W, 0.1 + 0.062 * max(len(line) for s in shapes for line in s.split("\n")))
              for _, shapes, _, _ in ps]
    width = max(9.0, left + max(w * len(p[1]) for w, p in zip(cell_w, ps)) + 1.2)  # room for the titles
    heights = [0.45 + CELL_H * len(series) + 0.5 for _, _, series, _ in ps]
    top, bottom = 0.75, 0.35
    height = top + sum(heights) + bottom
    fig = plt.figure(figsize=(width, height))
    fig.suptitle(title, x=0.02, y=1 - 0.12 / height, ha="left", va="top", fontsize=11, fontweight="bold")
    fig.text(0.02, 1 - 0.42 / height, run_summary(cases) + ".  Cell: % of copy bandwidth (100 = a copy's speed);"
             " ! = mismatching bytes, err = failed call.", ha="left", va="top", fontsize=8)
    y = height - top
    for (name, shapes, series, cells), h, w in zip(ps, heights, cell_w):
        y -= h
        ax = fig.add_axes([left / width, (y + 0.5) / height, w * len(shapes) / width,
                           CELL_H * len(series) / height])
        for i, s in enumerate(series):
            for j, shape in enumerate(shapes):
                c = cells.get((s, shape))
                if c is None:
                    continue
                pct = c.get("pct_of_copy")
                ok = c.get("status", "ok") == "ok" and pct is not None
                colour = cmap(norm(min(pct, 100))) if ok else (0.75, 0.75, 0.75, 1)
                ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=colour, edgecolor="white", linewidth=0.8))
                text = (f"{pct:.0f}" if pct >= 10 else f"{pct:.1f}") if ok else "err"
                if c.get("mismatches"):
                    text += "!"
                dark = ok and 0.299 * colour[0] + 0.587 * colour[1] + 0.114 * colour[2] < 0.45
                ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=7,
                        color="white" if dark else "black")
        ax.set_xlim(0, len(shapes))
        ax.set_ylim(len(series), 0)
        ax.set_xticks([j + 0.5 for j in range(len(shapes))], shapes, fontsize=6.5)
        ax.set_yticks([i + 0.5 for i in range(len(series))], series, fontsize=7.5)
        ax.tick_params(length=0)
        for spine in ax.spines.values():
            spine.set_visible(False)
        ax.set_title(name, loc="left", fontsize=9.5, fontweight="bold")
    cax = fig.add_axes([(width - 0.75) / width, (height - top - 2.2) / height, 0.12 / width, 2.0 / height])
    bar = fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), cax=cax)
    bar.set_label("% of copy", fontsize=8)
    bar.ax.tick_params(labelsize=7)
    fig.savefig(out, dpi=dpi)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m fusednorm.plot", description=__doc__.split("\n")[0])
    p.add_argument("json", nargs="*", help="fusednorm-bench --json output (JSON lines; - for stdin)")
    p.add_argument("-o", "--output", help="image to write (.png, .svg, .pdf) [the first input's name, .png]")
    p.add_argument("--title", default="fusednorm-bench: % of copy bandwidth by shape and mode")
    p.add_argument("--dpi", type=int, default=100)
    p.add_argument("--check", action="store_true", help="only check that matplotlib imports (exit status 0)")
    args = p.parse_args(argv)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        fail(MISSING_MATPLOTLIB.format(python=sys.executable))
    if args.check:
        return 0
    if not args.json:
        p.error("no input: give fusednorm-bench --json output")
    out = args.output
    if out is None:
        if args.json[0] == "-":
            p.error("-o is needed with stdin")
        out = args.json[0].rsplit(".", 1)[0] + ".png"
    cases = read_cases(args.json)
    if not cases:
        fail(f"no benchmark cases (JSON lines with pct_of_copy) in {', '.join(args.json)}")
    draw(cases, out, args.title, args.dpi)
    print(f"fusednorm.plot: {len(cases)} cases drawn into {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

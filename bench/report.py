#!/usr/bin/python3
# Turn bench/run's raw samples (raw.csv) into the table (table.txt and
# stdout), summary.csv, the PASS/FAIL lines for the performance budget
# and a gnuplot script for ratios.png.  What it shares with
# bench/wan-report.py (reading the samples, medians, the cells of the
# table, the PASS/FAIL targets, writing the files) is in
# bench/reportlib.py; its scenarios, columns and targets are here.
#
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.
#
# Exit status: 0 every target measured passed, 1 some target failed.

import argparse
import math
import os
import sys

# reportlib sits beside this script; no __pycache__ in the tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from reportlib import (  # noqa: E402
    COLORS, Targets, add_sample, csv_ratio, emit, fmt_ratio, gp_tics,
    meta_lines, parse_labels, read_rows, remove_stale, status_note,
    summarize, write_csv, write_lines)

# id, unit, description.  Unit "s" is the client's elapsed time (lower
# is better; ratios are throughput ratios, reference time / contender
# time).  "IOPS": higher is better, ratio contender / reference.
# "MiB", "conns" and "cpu/GiB": lower is better, ratio contender /
# reference.  "cpu/GiB" is CPU seconds (user + system) per GiB copied:
# nbdkit's own for the copy, the client's excluded, or curl's for its
# GET; it comes from the same runs as the seq-r-* times.
SCENARIOS = [
    ("seq-r-http", "s",
     'nbdcopy "$uri" null:  nbdkit -r, HTTP (multi-conn)'),
    ("seq-rw-http", "s",
     'nbdcopy -C 1 "$uri" null:  nbdkit read-write (1 NBD connection), HTTP'),
    ("seq-r-https", "s",
     'nbdcopy "$uri" null:  nbdkit -r, HTTPS, HTTP/1.1-only port'),
    ("seq-r-h2", "s",
     'nbdcopy "$uri" null:  nbdkit -r, HTTPS, HTTP/2 port'),
    ("qemu-r-http", "s",
     'qemu-img convert -n -f raw "$uri" null-co  nbdkit -r, HTTP'),
    ("rand-1x64", "IOPS",
     'fio randread 4 KiB, 1 NBD connection, queue depth 64  nbdkit -r, HTTP'),
    ("rand-4x16", "IOPS",
     'fio randread 4 KiB, 4 NBD connections, queue depth 16  nbdkit -r, HTTP'),
    ("rss-r-http", "MiB",
     'peak RSS (VmHWM) of nbdkit over a whole nbdcopy -r HTTP copy'),
    ("conns-r-http", "conns",
     'TCP connections nginx saw, nbdkit start to exit (probe + copy)'),
    ("conns-copy", "conns",
     'TCP connections nginx saw during the copy alone'),
    ("cpu-r-http", "cpu/GiB",
     "nbdkit's CPU s per GiB in seq-r-http's copies (curl: its GET's)"),
    ("cpu-r-https", "cpu/GiB",
     "nbdkit's CPU s per GiB in seq-r-https's copies (curl: its GET's)"),
    ("cpu-r-h2", "cpu/GiB",
     "nbdkit's CPU s per GiB in seq-r-h2's copies (curl: its GET's)"),
    ("cpu-qemu-http", "cpu/GiB",
     "nbdkit's CPU s per GiB in qemu-r-http's copies (no target)"),
]
ORDER = ["plugin", "debian", "file", "curl"]

# Chart rows: scenario, tick label.
CHART = [
    ("seq-r-http", "nbdcopy -r\\nHTTP"),
    ("seq-rw-http", "nbdcopy rw\\n1 conn, HTTP"),
    ("seq-r-https", "nbdcopy -r\\nHTTPS 1.1"),
    ("seq-r-h2", "nbdcopy -r\\nHTTP/2 TLS"),
    ("qemu-r-http", "qemu-img -r\\nHTTP"),
    ("rand-1x64", "rand 4k\\n1 conn QD64"),
    ("rand-4x16", "rand 4k\\n4 conns QD16"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--size-mib", type=float, required=True)
    ap.add_argument("--conn-limit", type=int, default=4)
    ap.add_argument("--meta")
    ap.add_argument("--label", action="append", default=[])
    a = ap.parse_args()
    labels = parse_labels(a.label)

    samples = {}     # (scenario, contender) -> [values]
    bad = {}         # (scenario, contender) -> {status: count}
    for row in read_rows(a.raw):
        add_sample(samples, bad, (row["scenario"], row["contender"]), row)

    def stats(sc, c):
        return summarize(samples.get((sc, c)))

    units = {s[0]: s[1] for s in SCENARIOS}

    def ratio(sc, c, ref):
        """Contender c against ref: higher is better for s and IOPS."""
        x, y = stats(sc, c), stats(sc, ref)
        if not x or not y or x[0] == 0 or y[0] == 0:
            return None
        if units[sc] == "s":
            return y[0] / x[0]
        return x[0] / y[0]

    lines = meta_lines(a.meta)
    lines.append("")
    lines.append("Ratios: for time and IOPS, the contender's throughput over "
                 "the reference's (>1 = faster);")
    lines.append("for MiB, conns and CPU, the contender's value over the "
                 "reference's (<1 = less).  Times: the client alone.")

    rows = []
    for sc, unit, desc in SCENARIOS:
        present = [c for c in ORDER if (sc, c) in samples]
        if not present:
            continue
        lines.append("")
        lines.append("== %s: %s" % (sc, desc))
        hdr = "%-22s %3s %10s %10s %10s %9s %8s %8s %8s" % (
            "contender", "n", "median", "min", "max",
            "MiB/s" if unit == "s" else "",
            "/debian", "/file", "/curl")
        lines.append(hdr)
        for c in present:
            st = stats(sc, c)
            name = labels.get(c, c)
            note = status_note(bad.get((sc, c)))
            if not st:
                lines.append("%-22s %3d %10s%s" % (name, 0, "no data", note))
                rows.append([sc, c, unit, 0, "", "", "", "", "", "", ""])
                continue
            med, lo, hi, n = st

            def fmt(v):
                if unit == "s":
                    return "%.3f s" % v
                if unit == "IOPS":
                    return "%.0f" % v
                if unit == "MiB":
                    return "%.1f MiB" % v
                if unit == "cpu/GiB":
                    return "%.3f s" % v
                return "%g" % v
            mibs = a.size_mib / med if unit == "s" and med > 0 else None
            rs = [ratio(sc, c, ref) if ref != c else None
                  for ref in ("debian", "file", "curl")]
            lines.append("%-22s %3d %10s %10s %10s %9s %8s %8s %8s%s" % (
                name, n, fmt(med), fmt(lo), fmt(hi),
                "%.1f" % mibs if mibs else "",
                *[fmt_ratio(r) for r in rs], note))
            rows.append([sc, c, unit, n, "%.4f" % med, "%.4f" % lo,
                         "%.4f" % hi, "%.1f" % mibs if mibs else ""] +
                        [csv_ratio(r) for r in rs])

    write_csv(os.path.join(a.out, "summary.csv"),
              ["scenario", "contender", "unit", "n", "median", "min", "max",
               "mib_per_s", "ratio_incumbent", "ratio_file",
               "ratio_curl_get"], rows)

    # Targets.
    lines.append("")
    lines.append("Targets (the project's performance targets; medians "
                 "unless said):")
    targets = Targets(unmeasured="N/A")
    target = targets.check

    def plugin_missing(sc):
        return (sc, "plugin") in samples and not samples[(sc, "plugin")]

    def perf(sc, ref, limit, name, op=">="):
        if plugin_missing(sc):
            targets.add("FAIL", name, "this plugin has no data "
                        "(broken or failed: see above)")
            return
        if (sc, "plugin") not in samples:
            return
        if (sc, ref) not in samples:
            targets.add("N/A", name, "needs contender %s" % ref)
            return
        target(name, ratio(sc, "plugin", ref), op, limit)

    perf("seq-r-http", "debian", 2.0, "seq -r HTTP >= 2x incumbent")
    perf("seq-r-http", "curl", 0.9, "seq -r HTTP >= 0.9x curl GET")
    perf("seq-r-https", "debian", 2.0, "seq -r HTTPS/1.1 >= 2x incumbent")
    perf("seq-r-https", "curl", 0.9, "seq -r HTTPS/1.1 >= 0.9x curl GET")
    perf("seq-r-h2", "debian", 2.0, "seq -r HTTP/2 >= 2x incumbent")
    perf("seq-r-h2", "curl", 0.9, "seq -r HTTP/2 >= 0.9x curl GET")
    perf("seq-rw-http", "debian", 1.8, "seq read-write HTTP >= 1.8x incumbent")
    h1, h2 = stats("seq-r-https", "plugin"), stats("seq-r-h2", "plugin")
    if h1 and h2:
        r = h1[0] / h2[0]
        note = ""
        if 0.95 <= r < 1.0:
            note = "  (within 5%: noise on a shared machine?)"
        if h2[1] <= h1[2] and h1[1] <= h2[2]:
            note += "  (min-max ranges overlap)"
        target("HTTP/2 no slower than HTTP/1.1 over TLS", r, ">=", 1.0,
               note=note)
    elif plugin_missing("seq-r-h2") or plugin_missing("seq-r-https"):
        targets.add("FAIL", "HTTP/2 no slower than HTTP/1.1 over TLS",
                    "this plugin has no data")
    perf("qemu-r-http", "debian", 1.5, "qemu-img convert >= 1.5x incumbent")

    # nbdkit's CPU per GiB at most 0.6x the incumbent's (issue 40; meant
    # with upstream's plugin as INCUMBENT).
    for sc, what in (("cpu-r-http", "HTTP"), ("cpu-r-https", "HTTPS/1.1"),
                     ("cpu-r-h2", "HTTP/2")):
        perf(sc, "debian", 0.6, "CPU per GiB, %s <= 0.6x incumbent" % what,
             "<=")
    perf("rand-1x64", "debian", 6.0, "random 4k, 1 conn QD64 >= 6x incumbent")
    perf("rand-4x16", "debian", 2.0,
         "random 4k, 4 conns QD16 >= 2x incumbent")
    st = stats("conns-r-http", "plugin")
    if st:
        target("connections per copy <= connections=%d (max of rounds)"
               % a.conn_limit, st[2], "<=", a.conn_limit, fmtv="%g")
    elif plugin_missing("conns-r-http"):
        targets.add("FAIL", "connections per copy", "no data")
    st = stats("rss-r-http", "plugin")
    if st:
        target("peak RSS < 64 MiB (max of rounds)", st[2], "<", 64.0,
               fmtv="%.1f MiB")
    elif plugin_missing("rss-r-http"):
        targets.add("FAIL", "peak RSS", "no data")

    lines += targets.lines(55)
    npass, nfail = targets.count("PASS"), targets.count("FAIL")
    lines.append("targets: %d PASS, %d FAIL, %d N/A" % (
        npass, nfail, targets.count("N/A")))

    emit(os.path.join(a.out, "table.txt"), lines)

    write_chart(a, labels, stats, ratio, npass, nfail)
    return 1 if nfail else 0


def write_chart(a, labels, stats, ratio, npass, nfail):
    """ratios.dat and ratios.gp: throughput ratios to the incumbent,
    with the targets; peak RSS and connection counts beside them."""
    rows = []
    for sc, tick in CHART:
        if not stats(sc, "debian"):
            continue
        pr = ratio(sc, "plugin", "debian")
        fr = ratio(sc, "file", "debian")
        cr = ratio(sc, "curl", "debian")
        tgt = {"seq-r-http": 2.0, "seq-r-https": 2.0, "seq-r-h2": 2.0,
               "seq-rw-http": 1.8, "qemu-r-http": 1.5, "rand-1x64": 6.0,
               "rand-4x16": 2.0}[sc]
        curl_tgt = 0.9 * cr if cr is not None and sc in (
            "seq-r-http", "seq-r-https", "seq-r-h2") else None
        rows.append((tick, pr, fr, cr, tgt, curl_tgt))
    side = []
    for sc, limit in (("rss-r-http", 64.0), ("conns-r-http", a.conn_limit)):
        for c in ORDER:
            st = stats(sc, c)
            if st:
                side.append((sc, c, st[0], limit))

    gp = os.path.join(a.out, "ratios.gp")
    if not rows and not side:
        remove_stale(gp)
        return

    def v(x):
        return "%.4f" % x if x is not None else "NaN"

    with open(os.path.join(a.out, "ratios.dat"), "w") as f:
        f.write("# tick plugin/debian file/debian curl/debian target "
                "0.9*curl/debian\n")
        for tick, pr, fr, cr, tgt, ct in rows:
            f.write('"%s" %s %s %s %s %s\n' % (tick, v(pr), v(fr), v(cr),
                                                 v(tgt), v(ct)))

    vals = [x for r in rows for x in r[1:] if x is not None and x > 0]
    lo = min(vals + [1.0]) if vals else 0.5
    hi = max(vals + [1.0]) if vals else 2.0
    ylo = 2 ** math.floor(math.log2(lo) - 0.3)
    yhi = 2 ** math.ceil(math.log2(hi) + 0.6)

    g = []
    g.append('set terminal pngcairo size 1500,820 font "DejaVu Sans,11"')
    g.append('set output "ratios.png"')
    g.append('set datafile missing "NaN"')
    g.append("set multiplot")
    title = ("this nbdkit curl plugin vs the incumbent (%s), %g MiB image "
             "on loopback: targets %d PASS, %d FAIL" % (
                 labels.get("debian", "debian"), a.size_mib, npass, nfail))
    g.append('set label 1 "%s" at screen 0.5,0.975 center font ",14"'
             % title)
    g.append('set label 2 "%s" at screen 0.005,0.012 left font ",9" '
             'tc rgb "#555555"' % provenance(a.meta))
    if rows:
        n = len(rows)
        g.append("set origin 0,0")
        g.append("set size 0.70,0.95")
        g.append("set logscale y 2")
        g.append("set yrange [%g:%g]" % (ylo, yhi))
        g.append("set xrange [-0.6:%g]" % (n - 0.4))
        g.append('set ylabel "throughput ratio to the incumbent '
                 '(log scale, higher is better)"')
        g.append("set grid ytics")
        g.append("set key top left box opaque")
        g.append("set style fill solid 0.85 border -1")
        g.append("set boxwidth 0.26")
        g.append("set xtics (%s) nomirror" % gp_tics(
            (t[0], i) for i, t in enumerate(rows)))
        g.append("set bmargin 4")
        g.append(
            'plot "ratios.dat" using ($0-0.28):2 with boxes '
            'lc rgb "#1f77b4" title "this plugin", '
            '"" using 0:3 with boxes lc rgb "#9e9e9e" '
            'title "nbdkit file (NBD stack limit)", '
            '"" using ($0+0.28):4 with boxes lc rgb "#2ca02c" '
            'title "curl GET (one stream)", '
            '"" using ($0-0.46):5:(0.36):(0) with vectors nohead lw 3 '
            'dt 2 lc rgb "#d62728" title "target vs incumbent", '
            '"" using ($0-0.46):6:(0.36):(0) with vectors nohead lw 3 '
            'dt 3 lc rgb "#ff7f0e" title "target: 0.9 x curl GET", '
            '"" using ($0-0.28):2:(sprintf("%.2f", $2)) with labels '
            'offset 0,0.7 font ",10" notitle, '
            '"" using 0:3:(sprintf("%.1f", $3)) with labels '
            'offset 0,0.7 font ",9" tc rgb "#555555" notitle, '
            '"" using ($0+0.28):4:(sprintf("%.2f", $4)) with labels '
            'offset 0,0.7 font ",9" tc rgb "#2ca02c" notitle, '
            '1 with lines lc rgb "black" lw 1 title "incumbent = 1"')
        g.append("unset logscale y")
        g.append("unset label 1")
        g.append("unset label 2")

    # Side panels: absolute values with their limits.
    panels = [("rss-r-http", "peak RSS of nbdkit (MiB)", 64.0, "64 MiB",
               0.5, "%.1f"),
              ("conns-r-http", "TCP connections per copy", a.conn_limit,
               "connections=%d" % a.conn_limit, 0.02, "%g")]
    if not rows:
        g.append('set label 3 "no throughput ratios: the incumbent was not '
                 'run (CONTENDERS)" at screen 0.35,0.5 center font ",12"')
    for sc, ylabel, limit, limit_name, y0, vfmt in panels:
        pts = [s for s in side if s[0] == sc]
        if not pts:
            continue
        g.append("set origin 0.70,%g" % y0)
        g.append("set size 0.30,0.45")
        g.append("set autoscale y")
        ymax = max([p[2] for p in pts] + [limit]) * 1.3
        g.append("set yrange [0:%g]" % ymax)
        g.append("set xrange [-0.6:%g]" % (len(pts) - 0.4))
        g.append('set ylabel "%s"' % ylabel)
        g.append("set grid ytics")
        g.append("set boxwidth 0.6")
        g.append("set style fill solid 0.85 border -1")
        g.append("set xtics (%s) nomirror" % gp_tics(
            (labels.get(p[1], p[1]).replace(" ", "\\n", 1), i)
            for i, p in enumerate(pts)))
        g.append("set key top right")
        g.append("$%s << EOD" % sc.replace("-", "_"))
        for i, p in enumerate(pts):
            g.append("%d %g %d" % (i, p[2], int(COLORS[p[1]][1:], 16)))
        g.append("EOD")
        g.append(
            'plot $%s using 1:2:3 with boxes lc rgb variable notitle, '
            '"" using 1:2:(sprintf("%s", $2)) with labels offset 0,0.7 '
            'notitle, %g with lines lw 3 dt 2 lc rgb "#d62728" '
            'title "limit: %s"' % (sc.replace("-", "_"), vfmt, limit,
                                   limit_name))
        g.append("unset label 3")
    g.append("unset label 2")
    g.append("unset multiplot")
    write_lines(gp, g)


def provenance(meta):
    """One small line for the chart: when, what, how many rounds."""
    if not meta or not os.path.exists(meta):
        return ""
    parts = []
    for line in open(meta):
        line = line.rstrip("\n")
        if line.startswith("date: "):
            parts.append(line[6:])
        elif line.startswith("plugin: ") and "(" in line:
            parts.append("plugin " + line.split("(", 1)[1].split(")")[0])
        elif line.startswith("rounds: "):
            parts.append("medians of " + line[8:].split(";")[0])
    return "; ".join(parts).replace('"', "'")


if __name__ == "__main__":
    sys.exit(main())

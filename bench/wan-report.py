#!/usr/bin/python3
# bench/wan's report: the tables, wan-summary.csv, the PASS/FAIL lines
# and a gnuplot script for wan.png, from wan.csv.
#
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.
#
# Exit status: 0 every target measured passed, 1 some target failed.

import argparse
import csv
import os
import statistics
import sys

ORDER = ["plugin", "plugin-t64", "upstream", "debian", "curl", "aria2c"]
DESC = {
    "seq": 'nbdcopy "$uri" null:  (MiB/s of the client alone)',
    "qemu": 'qemu-img convert -n -f raw "$uri" null-co  (MiB/s); '
            'curl and aria2c: their seq figures',
    "rand1": "fio randread 4 KiB, 1 NBD connection, QD64  (IOPS)",
    "rand4": "fio randread 4 KiB, 4 NBD connections x QD16, "
             "group_reporting  (IOPS)",
}
# NBD connections and queue depth per connection of the fio scenarios.
FIO = {"rand1": (1, 64), "rand4": (4, 16)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--meta")
    ap.add_argument("--conn-limit", type=int, default=16)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--rate-mbit", type=float, default=1000)
    ap.add_argument("--label", action="append", default=[])
    a = ap.parse_args()
    labels = dict(l.split("=", 1) for l in a.label)

    samples = {}   # (rtt, transport, scenario, contender) -> [values]
    bad = {}       # same key -> {status: n}
    cells = []
    with open(a.raw) as f:
        for row in csv.DictReader(f):
            cell = (int(row["rtt"]), row["transport"])
            if cell not in cells:
                cells.append(cell)
            k = cell + (row["scenario"], row["contender"])
            samples.setdefault(k, [])
            if row["status"] == "ok":
                samples[k].append(float(row["value"]))
            else:
                bad.setdefault(k, {}).setdefault(row["status"], 0)
                bad[k][row["status"]] += 1

    def key(cell, sc, c):
        # curl and aria2c are timed once per round (under seq) and are
        # the references of qemu too.
        if sc == "qemu" and c in ("curl", "aria2c"):
            sc = "seq"
        return cell + (sc, c)

    def stats(cell, sc, c):
        v = samples.get(key(cell, sc, c))
        if not v:
            return None
        return statistics.median(v), min(v), max(v), len(v)

    def med(cell, sc, c):
        s = stats(cell, sc, c)
        return s[0] if s else None

    def ratio(cell, sc, c, ref):
        x, y = med(cell, sc, c), med(cell, sc, ref)
        if x is None or not y or c == ref:
            return None
        return x / y

    def ceiling(cell, sc, c):
        conns, qd = FIO[sc]
        threads = 64 if c == "plugin-t64" else a.threads
        return conns * min(threads, qd) * 1000.0 / cell[0]

    line_mibs = a.rate_mbit * 1e6 / 8 / 1048576

    lines = []
    if a.meta and os.path.exists(a.meta):
        lines += open(a.meta).read().rstrip("\n").split("\n")
    lines.append("")
    lines.append("Ratios: the contender's median over the column's median "
                 "(>1 = faster).  /curl is the")
    lines.append("line-rate reference (a GET on an open connection; the "
                 "link is %.1f MiB/s). "
                 "/ceil: nbdkit's in-flight ceiling," % line_mibs)
    lines.append("NBD connections x min(threads per connection, queue "
                 "depth) / RTT: 16x1/RTT for rand1,")
    lines.append("16x4/RTT for rand4, 64/RTT for -t 64 (nbdkit's default "
                 "is %d threads)." % a.threads)

    rows = []
    refs = ["curl", "aria2c", "plugin", "upstream", "debian"]
    for cell in cells:
        for sc in ("seq", "qemu", "rand1", "rand4"):
            present = [c for c in ORDER if key(cell, sc, c) in samples]
            if sc == "qemu" and not any(
                    cell + ("qemu", c) in samples for c in ORDER):
                continue
            if not present:
                continue
            rand = sc.startswith("rand")
            lines.append("")
            lines.append("== RTT %d ms, %s, %s: %s" % (cell[0], cell[1], sc,
                                                        DESC[sc]))
            lines.append("%-24s %2s %9s %9s %9s  %7s %7s %7s %7s %7s %7s" % (
                "contender", "n", "median", "min", "max", "/curl", "/aria2c",
                "/plugin", "/upstr", "/debian", "/ceil"))
            for c in present:
                if rand and c in ("curl", "aria2c"):
                    continue
                st = stats(cell, sc, c)
                name = labels.get(c, c)
                if sc == "qemu" and c in ("curl", "aria2c"):
                    name += " (seq)"
                note = ""
                b = bad.get(key(cell, sc, c))
                if b:
                    note = "  (" + ", ".join(
                        "%d %s" % (n, s) for s, n in sorted(b.items())) + ")"
                if not st:
                    lines.append("%-24s %2d %9s%s" % (name, 0, "no data",
                                                      note))
                    rows.append([cell[0], cell[1], sc, c,
                                 "IOPS" if rand else "MiB/s", 0] +
                                [""] * 10)
                    continue
                m, lo, hi, n = st
                rs = [ratio(cell, sc, c, ref) for ref in refs]
                if rand:
                    rs[0] = rs[1] = None
                ceil = ceiling(cell, sc, c) if rand else None
                rc = m / ceil if ceil else None
                f = "%.0f" if rand else "%.1f"
                lines.append("%-24s %2d %9s %9s %9s  %s %s%s" % (
                    name, n, f % m, f % lo, f % hi,
                    " ".join("%7s" % ("%.2fx" % r if r is not None else "-")
                             for r in rs),
                    "%7s" % ("%.2fx" % rc if rc is not None else "-"),
                    note))
                rows.append([cell[0], cell[1], sc, c,
                             "IOPS" if rand else "MiB/s", n,
                             "%.2f" % m, "%.2f" % lo, "%.2f" % hi] +
                            ["%.3f" % r if r is not None else "" for r in rs] +
                            ["%.1f" % ceil if ceil else "",
                             "%.3f" % rc if rc is not None else ""])
        rc_rows = []
        for c in ("plugin", "upstream"):
            r_ = samples.get(cell + ("rss", c))
            n_ = samples.get(cell + ("conns", c))
            if r_ is None and n_ is None:
                continue
            rc_rows.append("%-24s peak RSS %s, most TCP connections to the "
                           "link at once %s" % (
                               labels.get(c, c),
                               "%.1f MiB" % max(r_) if r_ else "-",
                               "%d" % max(n_) if n_ else "-"))
            for sc_, v_, u_ in (("rss", r_, "MiB"), ("conns", n_, "conns")):
                if v_:
                    rows.append([cell[0], cell[1], sc_, c, u_, len(v_),
                                 "%g" % max(v_), "%g" % min(v_),
                                 "%g" % max(v_)] + [""] * 7)
        if rc_rows:
            lines.append("")
            lines.append("== RTT %d ms, %s: one untimed nbdcopy, default "
                         "settings: VmHWM after it; ss -tnp every 50 ms"
                         % cell)
            lines += rc_rows

    with open(os.path.join(a.out, "wan-summary.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["rtt_ms", "transport", "scenario", "contender", "unit",
                    "n", "median", "min", "max", "ratio_curl",
                    "ratio_aria2c", "ratio_plugin", "ratio_upstream",
                    "ratio_debian", "ceiling_iops", "ratio_ceiling"])
        w.writerows(rows)

    # Targets.
    results = []

    def target(name, value, op, limit, fmtv="%.2fx"):
        if value is None:
            results.append(("FAIL", name, "not measured"))
            return
        ok = {">=": value >= limit, ">": value > limit,
              "<": value < limit, "<=": value <= limit}[op]
        results.append(("PASS" if ok else "FAIL", name,
                        "%s %s %s" % (fmtv % value, op, fmtv % limit)))

    for cell in cells:
        cn = "%d ms %s" % cell
        for sc in ("seq", "qemu"):
            if cell + (sc, "plugin") not in samples:
                continue
            if key(cell, sc, "curl") in samples:
                target("%s %s >= 0.9x curl GET" % (cn, sc),
                       ratio(cell, sc, "plugin", "curl"), ">=", 0.9)
            if cell + (sc, "upstream") in samples:
                target("%s %s faster than upstream" % (cn, sc),
                       ratio(cell, sc, "plugin", "upstream"), ">", 1.0)
        for sc in ("rand1", "rand4"):
            for c in ("plugin", "plugin-t64"):
                if cell + (sc, c) not in samples:
                    continue
                m = med(cell, sc, c)
                ceil = ceiling(cell, sc, c)
                target("%s %s %s >= 0.9x ceiling %.0f IOPS" % (
                    cn, sc, "default" if c == "plugin" else "-t 64", ceil),
                    m / ceil if m is not None else None, ">=", 0.9)
            if (cell + (sc, "plugin") in samples and
                    cell + (sc, "upstream") in samples):
                target("%s %s >= upstream" % (cn, sc),
                       ratio(cell, sc, "plugin", "upstream"), ">=", 1.0)
        v = samples.get(cell + ("rss", "plugin"))
        if v is not None:
            target("%s peak RSS < 64 MiB" % cn, max(v) if v else None, "<",
                   64.0, fmtv="%.1f")
        v = samples.get(cell + ("conns", "plugin"))
        if v is not None:
            target("%s TCP connections <= connections=%d" % (cn, a.conn_limit),
                   max(v) if v else None, "<=", a.conn_limit, fmtv="%g")

    lines.append("")
    lines.append("Targets (DESIGN.md, Performance budget; medians):")
    for st, name, detail in results:
        lines.append("%-4s  %-52s %s" % (st, name, detail))
    npass = sum(1 for r in results if r[0] == "PASS")
    nfail = len(results) - npass
    lines.append("targets: %d PASS, %d FAIL" % (npass, nfail))

    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    with open(os.path.join(a.out, "wan-table.txt"), "w") as f:
        f.write(text)

    write_chart(a, labels, cells, med, npass, nfail, line_mibs)
    return 1 if nfail else 0


def write_chart(a, labels, cells, med, npass, nfail, line_mibs):
    """wan.dat and wan.gp: MiB/s against RTT, one line per contender and
    transport, seq and qemu side by side."""
    gp = os.path.join(a.out, "wan.gp")
    transports = []
    for c in cells:
        if c[1] not in transports:
            transports.append(c[1])
    rtts = sorted(set(c[0] for c in cells))
    series = []   # (scenario, contender, transport, [(rtt, v)])
    for sc in ("seq", "qemu"):
        for c in ["plugin", "upstream", "debian", "curl", "aria2c"]:
            if sc == "qemu" and c in ("curl", "aria2c"):
                continue    # plotted from seq in both panels
            for t in transports:
                pts = [(r, med((r, t), sc, c)) for r in rtts
                       if (r, t) in cells]
                pts = [p for p in pts if p[1] is not None]
                if pts:
                    series.append((sc, c, t, pts))
    if not series:
        if os.path.exists(gp):
            os.remove(gp)
        return
    with open(os.path.join(a.out, "wan.dat"), "w") as f:
        for i, (sc, c, t, pts) in enumerate(series):
            f.write("# %d %s %s %s\n" % (i, sc, c, t))
            for r, v in pts:
                f.write("%d %.3f\n" % (r, v))
            f.write("\n\n")
    colors = {"plugin": "#1f77b4", "upstream": "#ff7f0e",
              "debian": "#d62728", "curl": "#2ca02c", "aria2c": "#9467bd"}
    dashes = {"http": 1, "https": 2, "https1": 3}
    g = ['set terminal pngcairo size 1400,620 font "DejaVu Sans,11"',
         'set output "wan.png"',
         "set multiplot layout 1,2 title \"MiB/s through an emulated "
         "%g Mbit/s link, by RTT: targets %d PASS, %d FAIL\" font \",13\""
         % (a.rate_mbit, npass, nfail),
         "set grid",
         'set xlabel "RTT (ms)"',
         'set ylabel "MiB/s (median)"',
         "set logscale y 2",
         "set xtics (%s)" % ", ".join('"%d" %d' % (r, r) for r in rtts),
         "set xrange [%g:%g]" % (min(rtts) * 0.8 - 5, max(rtts) * 1.1 + 5),
         "set key bottom left font \",9\""]
    for sc, title in (("seq", "nbdcopy (curl, aria2c: one download)"),
                      ("qemu", "qemu-img convert (curl, aria2c: as seq)")):
        g.append('set title "%s"' % title)
        parts = []
        for i, (s, c, t, pts) in enumerate(series):
            if s != sc and not (sc == "qemu" and s == "seq" and
                                c in ("curl", "aria2c")):
                continue
            parts.append('"wan.dat" index %d using 1:2 with linespoints '
                         'lw 2 pt 7 dt %d lc rgb "%s" title "%s, %s"' % (
                             i, dashes.get(t, 1), colors[c],
                             labels.get(c, c), t))
        parts.append('%g with lines lc rgb "black" dt 3 title "link rate"'
                     % line_mibs)
        g.append("plot " + ", \\\n  ".join(parts))
    g.append("unset multiplot")
    with open(gp, "w") as f:
        f.write("\n".join(g) + "\n")


if __name__ == "__main__":
    sys.exit(main())

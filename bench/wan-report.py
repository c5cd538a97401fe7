#!/usr/bin/python3
# bench/wan's report: the tables (wan-table.txt and stdout),
# wan-summary.csv, the PASS/FAIL lines and gnuplot scripts for wan.png
# (served exports) and wan-start.png (whole process, nbdkit's start
# included), from wan.csv.  What it shares with bench/report.py
# (reading the samples, medians, the cells of the tables, the PASS/FAIL
# targets, writing the files) is in bench/reportlib.py; its scenarios,
# columns and targets are here.
#
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.
#
# Exit status: 0 every target measured passed, 1 some target failed.

import argparse
import os
import statistics
import sys

# reportlib sits beside this script; no __pycache__ in the tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from reportlib import (  # noqa: E402
    COLORS, Targets, add_sample, csv_ratio, emit, fmt_ratio, gp_tics,
    meta_lines, parse_labels, read_rows, remove_stale, status_note,
    summarize, write_csv, write_lines)

ORDER = ["plugin", "plugin-h1", "plugin-t64", "plugin-nora", "plugin-sum",
         "upstream", "upstream-ra", "debian", "curl", "aria2c", "h2load"]
DESC = {
    "seq": 'nbdcopy "$uri" null:  (MiB/s of the client alone)',
    "qemu": 'qemu-img convert -n -f raw "$uri" null-co  (MiB/s); '
            'curl and aria2c: their seq figures',
    "rand1": "fio randread 4 KiB, 1 NBD connection, QD64  (IOPS)",
    "rand4": "fio randread 4 KiB, 4 NBD connections x QD16, "
             "group_reporting  (IOPS)",
}
# NBD connections and queue depth per connection of the fio scenarios.
FIO = {"rand1": (1, 64), "rand4": (4, 16), "redir-rand1": (1, 64)}
# Whole-process rows (seconds from launching nbdkit ... --run CLIENT to
# its exit) and the served rows through the redirect.
START_DESC = {
    "first": "first 4 KiB read (first-read client); curl -r 0-4095",
    "whole-nbdcopy": 'nbdcopy "$uri" null:; curl: whole GET',
    "whole-qemu": "qemu-img convert to null-co; curl: its whole GET "
                  "(under whole-nbdcopy)",
    "redir-first": "first 4 KiB read through the redirect; "
                   "curl -L -r 0-4095",
    "redir-nbdcopy": "nbdcopy through the redirect; curl -L whole GET",
    "redir-qemu": "qemu-img convert through the redirect; curl -L "
                  "(under redir-nbdcopy)",
}
SERVED_REDIR_DESC = {
    "redir-rand1": "served export through the redirect: fio randread "
                   "4 KiB, 1 job QD64  (IOPS)",
    "redir-seq64k": "served export through the redirect: fio read "
                    "64 KiB, 1 job QD1  (MiB/s)",
}
# The curl reference of a row when it is timed under another.
CURL_UNDER = {"qemu": "seq", "whole-qemu": "whole-nbdcopy",
              "redir-qemu": "redir-nbdcopy", "qd1-4k": "qd1-64k",
              "qd1-1m": "qd1-64k", "qd4-64k": "qd1-64k",
              "qd1-boot": "qd1-64k", "qd1-rand4k": "qd1-64k"}
# Clients that keep little in flight (issue 20): served export, fio on
# one NBD connection, MiB/s; curl's GET (timed under qd1-64k) is the
# line-rate reference of each.
QD_DESC = {
    "qd1-4k": "fio read 4 KiB, QD1",
    "qd1-64k": "fio read 64 KiB, QD1",
    "qd1-1m": "fio read 1 MiB, QD1",
    "qd4-64k": "fio read 64 KiB, QD4",
    "qd1-boot": "fio 64 KiB QD1, one read in ten at a random place "
                "(randread, percentage_random=10)",
    "qd1-rand4k": "fio randread 4 KiB, QD1",
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--meta")
    ap.add_argument("--conn-limit", type=int, default=16)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--rate-mbit", type=float, default=1000)
    ap.add_argument("--label", action="append", default=[])
    ap.add_argument("--size-mib", type=float, default=0)
    # CONTENDER:TRANSPORT=PROTOCOL, as nginx logged it in verification.
    ap.add_argument("--proto", action="append", default=[])
    a = ap.parse_args()
    labels = parse_labels(a.label)
    protos = parse_labels(a.proto)

    samples = {}   # (rtt, transport, scenario, contender) -> [values]
    bad = {}       # same key -> {status: n}
    counts = {}    # same key -> {"front": [n], "origin": [n], "conns": [n]}
    overhead = {}  # client -> [seconds] (nbdkit null --run CLIENT)
    cells = []
    for row in read_rows(a.raw):
        if row["scenario"] == "client-overhead":
            if row["status"] == "ok":
                overhead.setdefault(row["contender"], []).append(
                    float(row["value"]))
            continue
        cell = (int(row["rtt"]), row["transport"])
        if cell not in cells:
            cells.append(cell)
        k = cell + (row["scenario"], row["contender"])
        for col, name in (("front_req", "front"), ("origin_req", "origin"),
                          ("tcp_conns", "conns")):
            if row.get(col):
                counts.setdefault(k, {}).setdefault(name, []).append(
                    int(row[col]))
        # Bytes the origin sent over bytes the client read.
        if row.get("origin_bytes") and row.get("read_bytes") and \
                int(row["read_bytes"]) > 0:
            counts.setdefault(k, {}).setdefault("fetched", []).append(
                int(row["origin_bytes"]) / int(row["read_bytes"]))
        add_sample(samples, bad, k, row)

    def key(cell, sc, c):
        # curl and aria2c are timed once per round (under seq, or the
        # whole-process copy) and are the references of qemu too.
        if sc in CURL_UNDER and c in ("curl", "aria2c"):
            sc = CURL_UNDER[sc]
        return cell + (sc, c)

    def stats(cell, sc, c):
        return summarize(samples.get(key(cell, sc, c)))

    def med(cell, sc, c):
        s = stats(cell, sc, c)
        return s[0] if s else None

    def ratio(cell, sc, c, ref):
        x, y = med(cell, sc, c), med(cell, sc, ref)
        if x is None or not y or c == ref:
            return None
        return x / y

    def ceiling(cell, sc, c):
        return ceiling_of(cell, sc, c, a.threads)

    def conns(cell, sc, c):
        """The TCP connections the runs of a row opened: [n, ...]."""
        return counts.get(key(cell, sc, c), {}).get("conns", [])

    line_mibs = a.rate_mbit * 1e6 / 8 / 1048576

    lines = meta_lines(a.meta)
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
    lines.append("h2load: nghttp2's load generator, one 4 KiB range again "
                 "and again on one HTTP/2")
    lines.append("connection with the row's streams in flight (https only): "
                 "what the link and nginx")
    lines.append("answer, no NBD; its /ceil is the share of the ceiling any "
                 "client could reach.")
    lines.append("TCP conns: the connections the contender opened to the "
                 "image's server per run")
    lines.append("(linkem's accepts; an NBD contender's from nbdkit's start "
                 "to its exit, probe included),")
    lines.append("one figure, or the range over the rounds.")

    rows = []
    refs = ["curl", "aria2c", "plugin", "upstream", "debian"]
    start_rows(a, labels, cells, samples, bad, counts, overhead, key, stats,
               med, lines, rows)
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
            lines.append("%-24s %2s %9s %9s %9s  %7s %7s %7s %7s %7s %7s "
                         "%9s" % (
                             "contender", "n", "median", "min", "max",
                             "/curl", "/aria2c", "/plugin", "/upstr",
                             "/debian", "/ceil", "TCP conns"))
            for c in present:
                if rand and c in ("curl", "aria2c"):
                    continue
                st = stats(cell, sc, c)
                name = labels.get(c, c)
                if sc == "qemu" and c in ("curl", "aria2c"):
                    name += " (seq)"
                note = status_note(bad.get(key(cell, sc, c)))
                tc = conns(cell, sc, c)
                if not st:
                    lines.append("%-24s %2d %9s%s" % (name, 0, "no data",
                                                      note))
                    rows.append([cell[0], cell[1], sc, c,
                                 "IOPS" if rand else "MiB/s", 0] +
                                [""] * 12 + conn_cols(tc))
                    continue
                m, lo, hi, n = st
                rs = [ratio(cell, sc, c, ref) for ref in refs]
                if rand:
                    rs[0] = rs[1] = None
                ceil = ceiling(cell, sc, c) if rand else None
                rc = m / ceil if ceil else None
                f = "%.0f" if rand else "%.1f"
                lines.append("%-24s %2d %9s %9s %9s  %s %s %9s%s" % (
                    name, n, f % m, f % lo, f % hi,
                    " ".join("%7s" % fmt_ratio(r) for r in rs),
                    "%7s" % fmt_ratio(rc), fmt_conns(tc), note))
                rows.append([cell[0], cell[1], sc, c,
                             "IOPS" if rand else "MiB/s", n,
                             "%.2f" % m, "%.2f" % lo, "%.2f" % hi] +
                            [csv_ratio(r) for r in rs] +
                            ["%.1f" % ceil if ceil else "", csv_ratio(rc),
                             "", ""] + conn_cols(tc))
        rc_rows = []
        for c in ("plugin", "plugin-h1", "upstream"):
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
                                 "%g" % max(v_)] + [""] * 11)
        if rc_rows:
            lines.append("")
            lines.append("== RTT %d ms, %s: one untimed nbdcopy, default "
                         "settings: VmHWM after it; ss -tnp every 50 ms"
                         % cell)
            lines += rc_rows

    qd_rows(labels, cells, samples, bad, counts, key, stats, ratio, lines,
            rows)

    write_csv(os.path.join(a.out, "wan-summary.csv"),
              ["rtt_ms", "transport", "scenario", "contender", "unit", "n",
               "median", "min", "max", "ratio_curl", "ratio_aria2c",
               "ratio_plugin", "ratio_upstream", "ratio_debian",
               "ceiling_iops", "ratio_ceiling", "front_req_median",
               "origin_req_median", "tcp_conns_min", "tcp_conns_max"], rows)

    # Targets.
    targets = Targets(unmeasured="FAIL")
    target = targets.check

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
            # Issue 23: checksum= costs at most 5% of a copy.
            if cell + (sc, "plugin-sum") in samples:
                target("%s %s checksum=sha256 >= 0.95x without" % (cn, sc),
                       ratio(cell, sc, "plugin-sum", "plugin"), ">=", 0.95)
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

    start_targets(a, cells, samples, counts, key, med, target)
    qd_targets(cells, samples, key, ratio, target, counts)
    h2 = Targets(unmeasured="FAIL")
    h2_targets(cells, samples, protos, med, ratio, ceiling, conns, h2)

    lines.append("")
    lines.append("Targets (the project's performance targets; medians):")
    lines += targets.lines(60)
    if h2.results:
        lines.append("")
        lines.append("Issue 22, HTTP/2 on the https port (this plugin by "
                     "default, against curl --http2;")
        lines.append("seq, qemu, rand1, rand4: served export, nbdkit's "
                     "start-up excluded; whole-nbdcopy,")
        lines.append("whole-qemu: whole process, nbdkit's start-up "
                     "included; medians; TCP conns: the most in")
        lines.append("any run of the row, probe included):")
        lines += h2.lines(60)
    npass = targets.count("PASS") + h2.count("PASS")
    nfail = targets.count("FAIL") + h2.count("FAIL")
    lines.append("targets: %d PASS, %d FAIL" % (npass, nfail))

    emit(os.path.join(a.out, "wan-table.txt"), lines)

    write_chart(a, labels, cells, med, npass, nfail, line_mibs)
    write_start_chart(a, labels, cells, med, npass, nfail)
    return 1 if nfail else 0


def start_rows(a, labels, cells, samples, bad, counts, overhead, key, stats,
               med, lines, rows):
    """The whole-process tables (nbdkit's start included) and the served
    rows through the redirect, with the requests each server saw."""
    if overhead:
        m = {c: statistics.median(v) for c, v in overhead.items()}
        base = m.get("none")
        parts = []
        for c in ("none", "first-read", "nbdsh"):
            if c in m:
                extra = ""
                if base is not None and c != "none":
                    extra = " (+%.1f ms)" % ((m[c] - base) * 1000)
                parts.append("%s %.1f ms%s" % (
                    "nbdkit alone (--run true)" if c == "none" else c,
                    m[c] * 1000, extra))
            rows.append([0, "-", "client-overhead", c, "s",
                         len(overhead.get(c, [])),
                         "%.4f" % m[c] if c in m else ""] + [""] * 13)
        lines.append("")
        lines.append("Client overhead, nbdkit -r -U - null 1M --run CLIENT "
                     "(no network; medians of 5):")
        lines.append("  " + "; ".join(parts))

    def cnt(k, name):
        v = counts.get(k, {}).get(name)
        if not v:
            return None
        return statistics.median(v), max(v)

    def fmt_cnt(c_):
        if c_ is None:
            return "-"
        m, hi = c_
        return ("%g" % m) if m == hi else "%g (max %g)" % (m, hi)

    for cell in cells:
        for sc in list(START_DESC) + list(SERVED_REDIR_DESC):
            present = [c for c in ORDER if key(cell, sc, c) in samples]
            if not any(cell + (sc, c) in samples for c in ORDER):
                continue
            served = sc in SERVED_REDIR_DESC
            first = sc.endswith("first")
            lines.append("")
            if served:
                lines.append("== RTT %d ms, %s, %s: %s" % (
                    cell[0], cell[1], sc, SERVED_REDIR_DESC[sc]))
            else:
                lines.append("== RTT %d ms, %s, %s: WHOLE PROCESS, "
                             "nbdkit's start included: %s" % (
                                 cell[0], cell[1], sc, START_DESC[sc]))
            unit = ("IOPS" if sc == "redir-rand1" else
                    "MiB/s" if served else "ms" if first else "s")
            lines.append("%-24s %2s %9s %9s %9s %7s %7s %7s %7s %7s %9s  %s"
                         % ("contender", "n", "median", "min", "max",
                            "MiB/s" if not first and not served else "",
                            "/curl", "/upstr", "/debian",
                            "/ceil" if sc == "redir-rand1" else "",
                            "TCP conns", "requests: front, origin"))
            for c in present:
                k = key(cell, sc, c)
                st = stats(cell, sc, c)
                name = labels.get(c, c)
                if sc in CURL_UNDER and c == "curl":
                    name += " (%s)" % CURL_UNDER[sc]
                note = status_note(bad.get(k))
                front, origin = cnt(k, "front"), cnt(k, "origin")
                reqs = "%s, %s" % (fmt_cnt(front), fmt_cnt(origin))
                tc = counts.get(k, {}).get("conns", [])
                if not st:
                    lines.append("%-24s %2d %9s  %s%s" % (name, 0, "no data",
                                                         reqs, note))
                    continue
                m, lo, hi, n = st

                def r_(ref):
                    y = med(cell, sc, ref)
                    if y is None or c == ref or not m:
                        return None
                    # Times: the reference's over ours (>1 = faster).
                    return m / y if served else y / m
                rs = [r_(ref) for ref in ("curl", "upstream", "debian")]
                ceil = rc = None
                if sc == "redir-rand1":
                    ceil = ceiling_of(cell, sc, c, a.threads)
                    rc = m / ceil
                scale = 1000.0 if first else 1.0
                f = "%.0f" if sc == "redir-rand1" else "%.1f" if (
                    served or first) else "%.2f"
                mibs = ("%.1f" % (a.size_mib / m)) if (
                    not first and not served and a.size_mib) else ""
                lines.append("%-24s %2d %9s %9s %9s %7s %s %7s %9s  %s%s" % (
                    name, n, f % (m * scale), f % (lo * scale),
                    f % (hi * scale), mibs,
                    " ".join("%7s" % fmt_ratio(x) for x in rs),
                    "%.2fx" % rc if rc is not None else "", fmt_conns(tc),
                    reqs, note))
                rows.append([cell[0], cell[1], sc, c,
                             "IOPS" if sc == "redir-rand1" else
                             "MiB/s" if served else "s", n,
                             "%.4f" % m, "%.4f" % lo, "%.4f" % hi,
                             csv_ratio(rs[0]), "", "", csv_ratio(rs[1]),
                             csv_ratio(rs[2]), "%.1f" % ceil if ceil else "",
                             csv_ratio(rc),
                             "%g" % front[0] if front else "",
                             "%g" % origin[0] if origin else ""] +
                            conn_cols(tc))


def qd_rows(labels, cells, samples, bad, counts, key, stats, ratio, lines,
            rows):
    """The rows of clients that keep little in flight, with the bytes
    the origin sent per byte read (read-ahead's waste)."""
    for cell in cells:
        for sc in QD_DESC:
            present = [c for c in ORDER if c not in ("curl", "aria2c") and
                       cell + (sc, c) in samples]
            if not present:
                continue
            lines.append("")
            lines.append("== RTT %d ms, %s, %s: served export: %s  (MiB/s)"
                         % (cell[0], cell[1], sc, QD_DESC[sc]))
            lines.append("%-24s %2s %9s %9s %9s  %7s %7s %9s %7s  %s" % (
                "contender", "n", "median", "min", "max", "/curl",
                "/upstr", "/upstr-ra", "/nora", "fetched/read, requests"))
            for c in present:
                k = key(cell, sc, c)
                st = stats(cell, sc, c)
                note = status_note(bad.get(k))
                name = labels.get(c, c)
                if not st:
                    lines.append("%-24s %2d %9s%s" % (name, 0, "no data",
                                                      note))
                    continue
                m, lo, hi, n = st
                rs = [ratio(cell, sc, c, ref)
                      for ref in ("curl", "upstream", "upstream-ra",
                                  "plugin-nora")]
                f = counts.get(k, {}).get("fetched")
                o = counts.get(k, {}).get("origin")
                waste = "%.2f" % statistics.median(f) if f else "-"
                reqs = "%g" % statistics.median(o) if o else "-"
                lines.append("%-24s %2d %9.2f %9.2f %9.2f  %s  %s, %s%s" % (
                    name, n, m, lo, hi,
                    "%7s %7s %9s %7s" % tuple(fmt_ratio(r) for r in rs),
                    waste, reqs, note))
                rows.append([cell[0], cell[1], sc, c, "MiB/s", n,
                             "%.2f" % m, "%.2f" % lo, "%.2f" % hi,
                             csv_ratio(rs[0]), "", "", csv_ratio(rs[1]),
                             "", "", "", "",
                             reqs if o else ""] +
                            conn_cols(counts.get(k, {}).get("conns", [])))
            if key(cell, sc, "curl") in samples:
                st = stats(cell, sc, "curl")
                if st:
                    lines.append("%-24s %2d %9.2f %9.2f %9.2f  (the "
                                 "line-rate reference)" % (
                                     labels.get("curl", "curl") +
                                     ("" if sc == "qd1-64k" else
                                      " (qd1-64k)"), st[3], st[0], st[1],
                                     st[2]))


def qd_targets(cells, samples, key, ratio, target, counts):
    """issue 20's targets for clients that keep one read in flight, and
    for random reads, which read-ahead must leave as they were (against
    this plugin with readahead-size=0)."""
    for cell in cells:
        cn = "%d ms %s" % cell
        for sc in ("rand1", "qd1-rand4k"):
            if (cell + (sc, "plugin") in samples and
                    cell + (sc, "plugin-nora") in samples):
                target("%s %s >= 0.95x readahead-size=0" % (cn, sc),
                       ratio(cell, sc, "plugin", "plugin-nora"), ">=", 0.95)
        f = counts.get(key(cell, "qd1-rand4k", "plugin"), {}).get("fetched")
        if f:
            target("%s qd1-rand4k fetched/read <= 1.10" % cn,
                   statistics.median(f), "<=", 1.10, fmtv="%.3f")
        for sc, share in (("qd1-64k", 0.5), ("qd1-1m", 0.8)):
            if cell + (sc, "plugin") not in samples:
                continue
            if key(cell, sc, "curl") in samples:
                target("%s %s >= %.1fx curl GET" % (cn, sc, share),
                       ratio(cell, sc, "plugin", "curl"), ">=", share)
            for ref in ("upstream", "upstream-ra"):
                if cell + (sc, ref) in samples:
                    target("%s %s ahead of %s" % (cn, sc, ref),
                           ratio(cell, sc, "plugin", ref), ">", 1.0)


def fmt_conns(v):
    """The TCP connections of a row's runs: "1", "12-16" (the range),
    or "-" without a count."""
    if not v:
        return "-"
    lo, hi = min(v), max(v)
    return "%d" % lo if lo == hi else "%d-%d" % (lo, hi)


def conn_cols(v):
    """wan-summary.csv's tcp_conns_min and tcp_conns_max."""
    return ["%d" % min(v), "%d" % max(v)] if v else ["", ""]


def ceiling_of(cell, sc, c, threads):
    conns, qd = FIO[sc]
    t = 64 if c == "plugin-t64" else threads
    return conns * min(t, qd) * 1000.0 / cell[0]


# Issue 22's rows: (scenario, what curl's row is) for the line-rate
# rows, the fio rows against their ceiling.
H2_CURL = (("seq", "GET"), ("qemu", "GET"),
           ("whole-nbdcopy", "whole GET"), ("whole-qemu", "whole GET"))
H2_FIO = ("rand1", "rand4")
# What each contender must have spoken on the https port.
H2_PROTO = (("plugin", "HTTP/2.0"), ("plugin-h1", "HTTP/1.1"),
            ("upstream", "HTTP/2.0"), ("curl", "HTTP/2.0"))
# Three places, so that a ratio a hair under 0.95 does not print as
# "0.95x >= 0.95x" beside a FAIL.
F3 = "%.3fx"


def h2_targets(cells, samples, protos, med, ratio, ceiling, conns, t):
    """issue 22's targets, on the https transport (the port that offers
    HTTP/2): this plugin's nbdcopy and qemu-img at 0.95x of curl's
    HTTP/2 GET (served and whole process), fio at 0.95x of the ceiling
    on one NBD connection and on four, ahead of upstream in each of
    those, on one TCP connection; and that each contender spoke the
    protocol its row claims (verification)."""
    if not any(cell[1] == "https" for cell in cells):
        return
    seen = [(c, want, protos["%s:https" % c]) for c, want in H2_PROTO
            if "%s:https" % c in protos]
    if seen:
        t.add("PASS" if all(w == g for _, w, g in seen) else "FAIL",
              "https: each spoke its row's protocol (verification)",
              "; ".join("%s %s" % (c, g) if g == w else
                        "%s %s (not %s)" % (c, g, w) for c, w, g in seen))
    for cell in cells:
        if cell[1] != "https":
            continue
        cn = "%d ms %s" % cell
        rows = []
        for sc, what in H2_CURL:
            if cell + (sc, "plugin") not in samples:
                continue
            rows.append(sc)
            p = med(cell, sc, "plugin")
            whole = sc.startswith("whole")

            def faster(ref):
                # Throughput ratio; for whole-process times, theirs
                # over ours.
                if not whole:
                    return ratio(cell, sc, "plugin", ref)
                y = med(cell, sc, ref)
                return y / p if p and y else None
            t.check("%s %s >= 0.95x curl --http2 %s" % (cn, sc, what),
                    faster("curl"), ">=", 0.95, fmtv=F3)
            if cell + (sc, "upstream") in samples:
                t.check("%s %s ahead of upstream" % (cn, sc),
                        faster("upstream"), ">", 1.0, fmtv=F3)
        for sc in H2_FIO:
            if cell + (sc, "plugin") not in samples:
                continue
            rows.append(sc)
            m = med(cell, sc, "plugin")
            ceil = ceiling(cell, sc, "plugin")
            t.check("%s %s >= 0.95x ceiling %.0f IOPS" % (cn, sc, ceil),
                    m / ceil if m is not None else None, ">=", 0.95,
                    fmtv=F3)
            # The ceiling as the link and nginx give it: h2load with as
            # many streams in flight; its own share of the ceiling shows
            # how much of it any client could reach.
            if cell + (sc, "h2load") in samples:
                h = med(cell, sc, "h2load")
                t.check("%s %s >= 0.95x h2load, same streams in flight "
                        "(h2load: %s of the ceiling)" % (
                            cn, sc, F3 % (h / ceil) if h else "-"),
                        ratio(cell, sc, "plugin", "h2load"), ">=", 0.95,
                        fmtv=F3)
            if cell + (sc, "upstream") in samples:
                t.check("%s %s ahead of upstream" % (cn, sc),
                        ratio(cell, sc, "plugin", "upstream"), ">", 1.0,
                        fmtv=F3)
        if rows:
            v = [n for sc in rows for n in conns(cell, sc, "plugin")]
            t.check("%s plugin on 1 TCP connection in every run" % cn,
                    max(v) if v else None, "<=", 1, fmtv="%g",
                    note=" (the most, over %s)" % ", ".join(rows))


def start_targets(a, cells, samples, counts, key, med, target):
    """issue 19's targets: what the user waits for from nbdkit's start."""
    for cell in cells:
        cn = "%d ms %s" % cell
        half = cell[0] / 2000.0
        for sc in ("first", "redir-first"):
            p = med(cell, sc, "plugin")
            if cell + (sc, "plugin") not in samples:
                continue
            cu = med(cell, sc, "curl")
            if key(cell, sc, "curl") in samples:
                target("%s %s <= curl + RTT/2 (%.0f ms)" % (
                    cn, sc, (cu + half) * 1000 if cu else 0),
                    p * 1000 if p is not None else None, "<=",
                    (cu + half) * 1000 if cu is not None else float("nan"),
                    fmtv="%.1f ms")
            if cell + (sc, "upstream") in samples:
                u = med(cell, sc, "upstream")
                target("%s %s ahead of upstream (time ratio)" % (cn, sc),
                       u / p if p and u else None, ">", 1.0)
        for sc in ("whole-nbdcopy", "whole-qemu", "redir-nbdcopy",
                   "redir-qemu"):
            if cell + (sc, "plugin") not in samples:
                continue
            p = med(cell, sc, "plugin")
            if key(cell, sc, "curl") in samples:
                cu = med(cell, sc, "curl")
                target("%s %s >= 0.9x curl%s whole GET" % (
                    cn, sc, " -L" if sc.startswith("redir") else ""),
                    cu / p if p and cu else None, ">=", 0.9)
            if cell + (sc, "upstream") in samples:
                u = med(cell, sc, "upstream")
                target("%s %s ahead of upstream" % (cn, sc),
                       u / p if p and u else None, ">", 1.0)
        # The redirect's price: no more than curl's (curl -L minus curl)
        # plus half a round trip.
        for d, r, cd, cr in (("first", "redir-first", "first", "redir-first"),
                             ("whole-nbdcopy", "redir-nbdcopy",
                              "whole-nbdcopy", "redir-nbdcopy"),
                             ("whole-qemu", "redir-qemu",
                              "whole-nbdcopy", "redir-nbdcopy")):
            if (cell + (d, "plugin") not in samples or
                    cell + (r, "plugin") not in samples):
                continue
            pd, pr = med(cell, d, "plugin"), med(cell, r, "plugin")
            ccd, ccr = med(cell, cd, "curl"), med(cell, cr, "curl")
            if None in (pd, pr, ccd, ccr):
                target("%s %s - %s <= (curl -L - curl) + RTT/2" % (cn, r, d),
                       None, "<=", 0)
                continue
            limit = max(ccr - ccd, 0.0) + half
            target("%s %s - %s <= (curl -L - curl) + RTT/2" % (cn, r, d),
                   (pr - pd) * 1000, "<=", limit * 1000, fmtv="%.1f ms")
        if cell + ("redir-rand1", "plugin") in samples:
            m = med(cell, "redir-rand1", "plugin")
            ceil = ceiling_of(cell, "redir-rand1", "plugin", a.threads)
            target("%s redir-rand1 >= 0.9x ceiling %.0f IOPS" % (cn, ceil),
                   m / ceil if m is not None else None, ">=", 0.9)
        for sc in ("redir-nbdcopy", "redir-qemu"):
            v = counts.get(cell + (sc, "plugin"), {}).get("front")
            if cell + (sc, "plugin") not in samples:
                continue
            target("%s %s redirects answered <= connections=%d" % (
                cn, sc, a.conn_limit), max(v) if v else None, "<=",
                a.conn_limit, fmtv="%g")


def rtt_axis(cells):
    """The transports, in the order first seen, and the RTTs, sorted."""
    transports = []
    for c in cells:
        if c[1] not in transports:
            transports.append(c[1])
    return transports, sorted(set(c[0] for c in cells))


def write_series(path, series, vfmt):
    """A gnuplot data file, one block per (scenario, contender,
    transport, [(rtt, value)]) series, its index in a comment."""
    with open(path, "w") as f:
        for i, (sc, c, t, pts) in enumerate(series):
            f.write("# %d %s %s %s\n" % (i, sc, c, t))
            for r, v in pts:
                f.write(("%d " + vfmt + "\n") % (r, v))
            f.write("\n\n")


def write_start_chart(a, labels, cells, med, npass, nfail):
    """wan-start.dat and wan-start.gp: the whole-process rows against RTT,
    direct (solid) and through the redirect (dashed), one panel each for
    the first read, nbdcopy and qemu-img."""
    gp = os.path.join(a.out, "wan-start.gp")
    transports, rtts = rtt_axis(cells)
    series = []   # (panel, scenario, contender, transport, [(rtt, v)])
    panels = (("first", ("first", "redir-first"), 1000.0),
              ("nbdcopy", ("whole-nbdcopy", "redir-nbdcopy"), 1.0),
              ("qemu", ("whole-qemu", "redir-qemu"), 1.0))
    for panel, scs, scale in panels:
        for sc in scs:
            for c in ["plugin", "plugin-h1", "upstream", "debian", "curl"]:
                for t in transports:
                    src = CURL_UNDER.get(sc, sc) if c == "curl" else sc
                    pts = [(r, med((r, t), src, c)) for r in rtts
                           if (r, t) in cells]
                    pts = [(r, v * scale) for r, v in pts if v is not None]
                    if pts:
                        series.append((panel, sc, c, t, pts))
    if not series:
        remove_stale(gp)
        return
    write_series(os.path.join(a.out, "wan-start.dat"),
                 [s[1:] for s in series], "%.4f")
    points = {"http": 7, "https": 5, "https1": 9}
    g = ['set terminal pngcairo size 1800,620 font "DejaVu Sans,11"',
         'set output "wan-start.png"',
         "set multiplot layout 1,3 title \"Whole process, nbdkit's start "
         "included (solid: direct, dashed: through a 302 to another "
         "origin; lower is better): targets %d PASS, %d FAIL\" "
         "font \",13\"" % (npass, nfail),
         "set grid",
         'set xlabel "RTT (ms)"',
         "set logscale y 2",
         "set xtics (%s)" % gp_tics((r, r) for r in rtts),
         "set xrange [%g:%g]" % (min(rtts) * 0.8 - 5, max(rtts) * 1.1 + 5),
         "set key top left font \",8\""]
    titles = {"first": ("first 4 KiB read (curl -r 0-4095)", "ms"),
              "nbdcopy": ("nbdcopy null: (curl: whole GET)", "s"),
              "qemu": ("qemu-img convert null-co (curl: whole GET)", "s")}
    for panel, _, _ in panels:
        parts = []
        for i, (p, sc, c, t, pts) in enumerate(series):
            if p != panel:
                continue
            redir = sc.startswith("redir")
            parts.append('"wan-start.dat" index %d using 1:2 with '
                         'linespoints lw 2 pt %d dt %d lc rgb "%s" '
                         'title "%s, %s%s"' % (
                             i, points.get(t, 7), 2 if redir else 1,
                             COLORS[c], labels.get(c, c), t,
                             ", redirect" if redir else ""))
        if not parts:
            continue
        g.append('set title "%s"' % titles[panel][0])
        g.append('set ylabel "%s (median)"' % titles[panel][1])
        g.append("plot " + ", \\\n  ".join(parts))
    g.append("unset multiplot")
    write_lines(gp, g)


def write_chart(a, labels, cells, med, npass, nfail, line_mibs):
    """wan.dat and wan.gp: MiB/s against RTT, one line per contender and
    transport, seq and qemu side by side."""
    gp = os.path.join(a.out, "wan.gp")
    transports, rtts = rtt_axis(cells)
    series = []   # (scenario, contender, transport, [(rtt, v)])
    for sc in ("seq", "qemu"):
        for c in ["plugin", "plugin-h1", "upstream", "debian", "curl",
                  "aria2c"]:
            if sc == "qemu" and c in ("curl", "aria2c"):
                continue    # plotted from seq in both panels
            for t in transports:
                pts = [(r, med((r, t), sc, c)) for r in rtts
                       if (r, t) in cells]
                pts = [p for p in pts if p[1] is not None]
                if pts:
                    series.append((sc, c, t, pts))
    if not series:
        remove_stale(gp)
        return
    write_series(os.path.join(a.out, "wan.dat"), series, "%.3f")
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
         "set xtics (%s)" % gp_tics((r, r) for r in rtts),
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
                             i, dashes.get(t, 1), COLORS[c],
                             labels.get(c, c), t))
        parts.append('%g with lines lc rgb "black" dt 3 title "link rate"'
                     % line_mibs)
        g.append("plot " + ", \\\n  ".join(parts))
    g.append("unset multiplot")
    write_lines(gp, g)


if __name__ == "__main__":
    sys.exit(main())

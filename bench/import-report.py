#!/usr/bin/env python3
# bench/import's report: medians of the rounds per (RTT, transport,
# row, contender), each import row's ratio to one curl GET of the same
# file through the same link (curl's seconds / the row's, so higher is
# better), the targets (PASS/FAIL), a chart of the ratios in text and
# the table in OUT/import-table.txt.
#
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reportlib  # noqa: E402

ROWS = ["cdi-qcow2", "cdi-raw", "v2v", "nbdcopy-qcow2"]
FILE_OF = {"cdi-qcow2": "qcow2", "nbdcopy-qcow2": "qcow2",
           "cdi-raw": "raw", "v2v": "v2v"}
# The rows with a target, and how the target line names them.
TARGETS = {"cdi-qcow2": "CDI qcow2", "cdi-raw": "CDI raw",
           "v2v": "virt-v2v"}
TARGET = 0.9
CHART_WIDTH = 50
CHART_MAX = 1.5           # the ratio at the chart's right edge


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--meta")
    ap.add_argument("--upstream-timeout", type=int, default=60)
    a = ap.parse_args()

    samples, bad, requests, protos = {}, {}, {}, {}
    for row in reportlib.read_rows(a.raw):
        k = (int(row["rtt"]), row["transport"], row["row"], row["contender"])
        row["value"] = row["seconds"]
        reportlib.add_sample(samples, bad, k, row)
        if row["status"] == "ok" and row["requests"]:
            requests.setdefault(k, []).append(int(row["requests"]))
        if row["protocol"]:
            protos.setdefault(k, set()).update(row["protocol"].split())

    def median(k):
        s = reportlib.summarize(samples.get(k, []))
        return s[0] if s else None

    order = {"http": 0, "https": 1, "https1": 2}
    links = sorted({(k[0], k[1]) for k in samples},
                   key=lambda x: (x[0], order.get(x[1], 9)))

    lines = reportlib.meta_lines(a.meta)
    lines += [
        "",
        "seconds: the whole process, from launching nbdkit to the client's "
        "exit (nbdkit's start inside); curl: one GET of the same file "
        "through the same link, its whole command, the fastest of the "
        "round's tries; ratio = curl's seconds / the row's (higher is "
        "better, target >= %.1fx); req: nginx's requests per run (median); "
        "medians of the rounds" % TARGET,
        ""]
    fmt = "%-4s %-6s %-14s %-9s %17s %7s %6s %5s  %-9s %s"
    lines.append(fmt % ("RTT", "link", "row", "contender", "seconds",
                        "curl s", "ratio", "req", "protocol",
                        "seconds of each run"))
    ratios = {}
    for rtt, t in links:
        for row in ROWS + ["curl-qcow2", "curl-raw", "curl-v2v"]:
            for c in ["plugin", "upstream", "curl"]:
                k = (rtt, t, row, c)
                if k not in samples:
                    continue
                m = median(k)
                ref = None
                if row in FILE_OF:
                    ref = median((rtt, t, "curl-" + FILE_OF[row], "curl"))
                ratio = ref / m if ref is not None and m else None
                ratios[k] = ratio
                st = bad.get(k, {})
                if m is not None:
                    secs = "%.2f" % m
                elif "timeout" in st:
                    limit = (a.upstream_timeout if c == "upstream"
                             else None)
                    secs = (">%d s (timed out)" % limit if limit
                            else "timed out")
                else:
                    secs = "-"
                req = requests.get(k)
                lines.append(fmt % (
                    rtt, t, row, c, secs,
                    "%.2f" % ref if ref is not None else "",
                    reportlib.fmt_ratio(ratio) if row in FILE_OF else "",
                    "%d" % sorted(req)[len(req) // 2] if req else "-",
                    ",".join(sorted(protos.get(k, []))),
                    " ".join("%.2f" % s for s in samples[k])
                    + reportlib.status_note(st)))
    lines.append("")

    # The chart: one bar of '#' per import row and contender, its
    # length the ratio to curl, '|' where the target is.
    mark = int(round(TARGET / CHART_MAX * CHART_WIDTH))
    lines.append("ratio to one curl GET (0 to %.1fx; '|' marks %.1fx)"
                 % (CHART_MAX, TARGET))
    for rtt, t in links:
        for row in ROWS:
            for c in ["plugin", "upstream"]:
                k = (rtt, t, row, c)
                if k not in samples:
                    continue
                r = ratios.get(k)
                n = int(round(min(r or 0, CHART_MAX) / CHART_MAX
                              * CHART_WIDTH))
                bar = "".join("|" if i == mark else "#" if i < n else " "
                              for i in range(CHART_WIDTH + 1))
                if "WRONG" in bad.get(k, {}):
                    note = "WRONG"
                elif r is not None:
                    note = "%.2fx" % r
                elif "timeout" in bad.get(k, {}):
                    note = "timed out"
                else:
                    note = "-"
                lines.append("%4d %-6s %-14s %-9s %s %s" % (
                    rtt, t, row, c, bar, note))
    lines.append("")

    targets = reportlib.Targets("FAIL")
    for rtt, t in links:
        for row, what in TARGETS.items():
            k = (rtt, t, row, "plugin")
            if k not in samples:
                continue
            name = "target: %s >= %.1fx curl GET (RTT %d ms, %s)" % (
                what, TARGET, rtt, t)
            st = bad.get(k, {})
            if st:
                targets.add("FAIL", name, "runs not ok:"
                            + reportlib.status_note(st))
                continue
            targets.check(name, ratios.get(k), ">=", TARGET,
                          note=", byte-exact in %d runs" % len(samples[k]))
    # A wrong copy fails whatever row it is in, the reference rows too.
    for k, st in sorted(bad.items()):
        if "WRONG" in st and (k[2] not in TARGETS or k[3] != "plugin"):
            targets.add("FAIL", "byte-exact: %s %s (RTT %d ms, %s)" % (
                k[2], k[3], k[0], k[1]), "%d runs WRONG" % st["WRONG"])
    width = max([len(r[1]) for r in targets.results] + [10])
    lines += targets.lines(width)
    lines.append("%d passed, %d failed" % (targets.count("PASS"),
                                           targets.count("FAIL")))
    reportlib.emit(os.path.join(a.out, "import-table.txt"), lines)
    return 1 if targets.count("FAIL") else 0


if __name__ == "__main__":
    sys.exit(main())

# What bench/report.py (bench/run's report) and bench/wan-report.py
# (bench/wan's report) have in common: reading the samples of a raw CSV,
# medians, the cells of the tables, the PASS/FAIL targets, writing the
# report and the gnuplot scripts (with one color per contender).  What
# each measures, its columns, its targets and its charts stay in its own
# program.
#
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.

import csv
import operator
import os
import statistics
import sys

# One color per contender, the same in every chart.
COLORS = {"plugin": "#1f77b4", "plugin-h1": "#17becf", "upstream": "#ff7f0e",
          "debian": "#d62728", "file": "#9e9e9e", "curl": "#2ca02c",
          "aria2c": "#9467bd"}


def parse_labels(pairs):
    """--label CONTENDER=TEXT options as a dict."""
    return dict(p.split("=", 1) for p in pairs)


def read_rows(path):
    """The rows of a raw CSV, as dicts keyed by its header."""
    with open(path) as f:
        yield from csv.DictReader(f)


def add_sample(samples, bad, k, row):
    """File a row under key k: its value in samples[k] if its status is
    ok, else one more of its status in bad[k].  samples[k] exists either
    way, so a key with only failed rounds is there with no values."""
    samples.setdefault(k, [])
    if row["status"] == "ok":
        samples[k].append(float(row["value"]))
    else:
        bad.setdefault(k, {}).setdefault(row["status"], 0)
        bad[k][row["status"]] += 1


def summarize(values):
    """(median, min, max, n) of values; None without any."""
    if not values:
        return None
    return statistics.median(values), min(values), max(values), len(values)


def status_note(statuses):
    """The failed rounds of a row, "  (1 failed, 2 timeout)", or ""."""
    if not statuses:
        return ""
    return "  (" + ", ".join(
        "%d %s" % (n, s) for s, n in sorted(statuses.items())) + ")"


def fmt_ratio(r):
    """A ratio in a table: "1.23x", or "-" without one."""
    return "%.2fx" % r if r is not None else "-"


def csv_ratio(r):
    """A ratio in a summary CSV: "1.234", or "" without one."""
    return "%.3f" % r if r is not None else ""


def meta_lines(path):
    """The lines of the run's meta file (the report's head), or none."""
    if not path or not os.path.exists(path):
        return []
    with open(path) as f:
        return f.read().rstrip("\n").split("\n")


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def write_lines(path, lines):
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def emit(path, lines):
    """The report: on stdout and in path."""
    sys.stdout.write("\n".join(lines) + "\n")
    write_lines(path, lines)


def remove_stale(path):
    """A chart with nothing to plot: remove an earlier run's script, so
    the benchmark draws no chart from it."""
    if os.path.exists(path):
        os.remove(path)


def gp_tics(tics):
    """gnuplot's list of (label, position) tics: "label" 0, ..."""
    return ", ".join('"%s" %d' % (label, x) for label, x in tics)


OPS = {">=": operator.ge, ">": operator.gt, "<": operator.lt,
       "<=": operator.le}


class Targets:
    """The PASS/FAIL verdicts of the performance targets, in the order
    they were checked.  A target without a value is "not measured",
    with the status unmeasured: N/A in bench/run's report, FAIL in
    bench/wan's."""

    def __init__(self, unmeasured):
        self.unmeasured = unmeasured
        self.results = []      # (status, name, detail)

    def add(self, status, name, detail):
        self.results.append((status, name, detail))

    def check(self, name, value, op, limit, fmtv="%.2fx", note=""):
        """value op limit (op one of >=, >, <, <=)?"""
        if value is None:
            self.add(self.unmeasured, name, "not measured")
            return
        ok = OPS[op](value, limit)
        self.add("PASS" if ok else "FAIL", name, "%s %s %s%s" % (
            fmtv % value, op, fmtv % limit, note))

    def count(self, status):
        return sum(1 for r in self.results if r[0] == status)

    def lines(self, width):
        """One line per target, its name padded to width."""
        return ["%-4s  %-*s %s" % (status, width, name, detail)
                for status, name, detail in self.results]

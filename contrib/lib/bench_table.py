"""The OSU-style benchmarks' output as the perf/*_compare.sh scripts tabulate it.

Imported by their Python parts (PYTHONPATH=contrib/lib).
"""


def read(path, bw_col):
    """{size: (average latency in us, bandwidth in MB/s)} from one benchmark run's output:
    comment and blank lines skipped, bandwidth from column bw_col (0-based)."""
    rows = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            fields = line.split()
            rows[int(fields[0])] = (float(fields[1]), float(fields[bw_col]))
    return rows


def print_rows(names, data):
    """A row per size that dualrail-2 measured, a "bandwidth (latency)" cell per configuration
    (nan where one lacks the size); returns the sizes."""
    sizes = sorted(data["dualrail-2"])
    print("%-10s" % "size" + "".join("%22s" % n for n in names))
    for s in sizes:
        cells = []
        for n in names:
            lat, bw = data[n].get(s, (float("nan"), float("nan")))
            cells.append("%22s" % ("%.2f (%.0f)" % (bw, lat)))
        print("%-10d" % s + "".join(cells))
    return sizes

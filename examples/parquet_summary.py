#!/usr/bin/env python3
"""Per-application totals and top talkers computed from Sluice's Parquet
records by another engine, checked against Sluice's own summary.

    sluice analyze trace.pcap --format parquet -o out
    python3 examples/parquet_summary.py out                  # DuckDB
    python3 examples/parquet_summary.py out --engine spark   # Spark, local mode
    python3 examples/parquet_summary.py out --check          # exit 1 if they differ

The query is what `summary.json` counts: each flow's packets and bytes under
its `app` label, and each flow's bytes to both of its hosts. Top talkers are
exact in Sluice's summary while `talkers_error_bound` is 0; above that, the
check allows each host's bytes to be off by the bound.
"""

import argparse
import json
import os
import sys

APPS = """
    SELECT app, count(*) AS flows, sum(packets) AS packets, sum(bytes) AS bytes
    FROM flows GROUP BY app
"""

TALKERS = """
    SELECT host, sum(bytes) AS bytes FROM (
        SELECT src_ip AS host, bytes FROM flows
        UNION ALL
        SELECT dst_ip AS host, bytes FROM flows
    ) GROUP BY host ORDER BY bytes DESC, host LIMIT {n}
"""


def with_duckdb(directory, n):
    import duckdb

    con = duckdb.connect()
    pattern = os.path.join(directory, "flows-*.parquet")
    con.execute(f"CREATE VIEW flows AS SELECT * FROM read_parquet('{pattern}')")
    apps = {a: [int(f), int(p), int(b)] for a, f, p, b in con.execute(APPS).fetchall()}
    talkers = [[h, int(b)] for h, b in con.execute(TALKERS.format(n=n)).fetchall()]
    return apps, talkers


def with_spark(directory, n):
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("sluice-parquet-summary")
        .config("spark.ui.enabled", "false")
        # Spark has no nanosecond timestamps: read them as integers.
        .config("spark.sql.legacy.parquet.nanosAsLong", "true")
        .getOrCreate()
    )
    spark.read.parquet(os.path.join(directory, "flows-*.parquet")).createOrReplaceTempView("flows")
    apps = {r[0]: [int(r[1]), int(r[2]), int(r[3])] for r in spark.sql(APPS).collect()}
    talkers = [[r[0], int(r[1])] for r in spark.sql(TALKERS.format(n=n)).collect()]
    spark.stop()
    return apps, talkers


def differences(apps, talkers, summary):
    """What differs from summary.json, as readable lines."""
    found = []
    expected = {name: [c["flows"], c["packets"], c["bytes"]] for name, c in summary["applications"]}
    for name in sorted(set(expected) | set(apps)):
        if expected.get(name) != apps.get(name):
            found.append(f"application {name}: summary {expected.get(name)}, records {apps.get(name)}")
    bound = summary.get("talkers_error_bound", 0)
    theirs = {t["host"]: t["bytes"] for t in summary["top_talkers"]}
    ours = dict(talkers)
    # Hosts tied at the last place may be cut differently: compare the
    # hosts above the summary's last figure, and every figure.
    last = min(theirs.values(), default=0)
    for host, count in theirs.items():
        if count > last and abs(ours.get(host, -1) - count) > bound:
            found.append(f"talker {host}: summary {count}, records {ours.get(host)}")
    if sorted(theirs.values()) != sorted(b for _, b in talkers) and bound == 0:
        found.append(f"top talkers' bytes: summary {sorted(theirs.values())}, records {sorted(b for _, b in talkers)}")
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", help="the output folder of a run with --format parquet")
    parser.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb")
    parser.add_argument("--check", action="store_true", help="compare with DIR/summary.json")
    args = parser.parse_args()
    with open(os.path.join(args.dir, "summary.json")) as f:
        summary = json.load(f)
    n = len(summary["top_talkers"]) or 20
    run = with_duckdb if args.engine == "duckdb" else with_spark
    apps, talkers = run(args.dir, n)
    print(json.dumps({"applications": apps, "top_talkers": talkers}, indent=1))
    if args.check:
        found = differences(apps, talkers, summary)
        for line in found:
            print(f"differs: {line}", file=sys.stderr)
        if found:
            sys.exit(1)
        print(f"{args.engine}: the records give the summary's applications and top talkers", file=sys.stderr)


if __name__ == "__main__":
    main()

"""Drives the web console in headless Chromium (Debian's, through
Playwright for Python) as a user would, and prints what it saw as one JSON
object for the Rust tests (crates/sluice/tests/console_browser.rs and
alarms_live.rs) to judge.

    python3 console.py --url http://127.0.0.1:8080/ --detector syn_flood \
        [--host 198.51.100.80] --download flood.pcap [--live] [--screenshots DIR]

It loads the page and collects every console error and uncaught exception;
with --live, checks that the charts gain points while traffic flows; waits
for an alarm of --detector in the alarm list, then for its evidence link,
and downloads the pcap through the link to --download; searches the flows
of --host through the form and counts the rows shown (with --host).
"""

import argparse
import json
import sys
import time

from playwright.sync_api import sync_playwright

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--detector", required=True)
    p.add_argument("--host", help="search the flows of this host (records are written as flows end: none yet for a live flood)")
    p.add_argument("--download", required=True)
    p.add_argument("--live", action="store_true")
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--screenshots")
    args = p.parse_args()
    seen = {"console_errors": []}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900}, accept_downloads=True)
        page.on("console", lambda m: m.type == "error" and seen["console_errors"].append(m.text))
        page.on("pageerror", lambda e: seen["console_errors"].append(str(e)))
        page.goto(args.url)
        page.wait_for_selector("#chart-pps canvas", timeout=args.timeout * 1000)
        page.wait_for_function("document.querySelector('#state').textContent !== 'loading'")
        seen["state"] = page.inner_text("#state")
        seen["charts"] = page.locator("#charts canvas").count()
        seen["points"] = page.evaluate("series.ts.length")
        if args.live:
            # The charts move while the traffic flows.
            time.sleep(4)
            seen["points_later"] = page.evaluate("series.ts.length")
            seen["pps_later"] = page.evaluate("series.pps.reduce((a, b) => a + b, 0)")
        started = time.time()
        row = f"#alarm-table tr[data-detector='{args.detector}']"
        page.wait_for_selector(row, timeout=args.timeout * 1000)
        seen["alarm_after_s"] = time.time() - started
        seen["alarm_unix_s"] = time.time()
        seen["alarm_hosts"] = page.inner_text(f"{row} td:nth-child(10)")
        link = f"{row} a.evidence.evidence"
        page.wait_for_selector(link, timeout=args.timeout * 1000)
        if args.screenshots:
            page.screenshot(path=f"{args.screenshots}/console-traffic.png")
            page.locator("#alarms").screenshot(path=f"{args.screenshots}/console-alarms.png")
        with page.expect_download() as download:
            page.click(link)
        download.value.save_as(args.download)
        seen["downloaded"] = args.download
        if args.host:
            search_flows(page, args, seen)
        browser.close()
    json.dump(seen, sys.stdout)
    print()


def search_flows(page, args, seen):
    page.fill("#flow-host", args.host)
    page.click("#flow-search")
    page.wait_for_function(
        """host => {
            const rows = [...document.querySelectorAll('#flow-table tbody tr')];
            return rows.length > 0 && rows.every(r =>
                [4, 5].some(i => r.querySelector(`td:nth-child(${i})`).textContent.startsWith(host + ':')));
        }""",
        arg=args.host,
        timeout=args.timeout * 1000,
    )
    seen["flow_rows"] = page.locator("#flow-table tbody tr").count()
    seen["flow_note"] = page.inner_text("#flow-note")
    if args.screenshots:
        page.locator("#flows").scroll_into_view_if_needed()
        page.evaluate("document.querySelector('#flows').scrollIntoView()")
        page.screenshot(path=f"{args.screenshots}/console-flows.png")


if __name__ == "__main__":
    main()

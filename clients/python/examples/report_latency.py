#!/usr/bin/env python3
"""Reports one latency value of an overlay to the atoll daemon (the
proactive policy of inTune: the application measures, the overlay's policy
acts) and prints the answer.

    report_latency.py [--socket SOCKET] OVERLAY MICROSECONDS

Prints "holds: ..." or "does not hold: ..." (with what the overlay's policy
did about it) and exits 0; on an error prints it to stderr and exits 1.
Needs the package: pip install clients/python.
"""

import argparse
import sys

from atoll_client import DEFAULT_SOCKET, AtollError, Client


def main() -> int:
    p = argparse.ArgumentParser(description="Report a latency value to atoll.")
    p.add_argument("--socket", default=DEFAULT_SOCKET, help="daemon socket (default: %(default)s)")
    p.add_argument("overlay", help="the overlay whose property is a latency bound")
    p.add_argument("microseconds", type=float, help="the latency measured")
    args = p.parse_args()
    try:
        with Client(args.socket) as c:
            r = c.report(args.overlay, args.microseconds)
    except AtollError as e:
        print(f"report_latency: {e.code}: {e.message}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"report_latency: cannot talk to the atoll daemon at {args.socket}: {e}", file=sys.stderr)
        return 1
    verdict = "holds" if r.holds else "does not hold"
    text = f"the property of overlay {r.overlay} {verdict}"
    if r.action:
        text += f"; {r.action}"
    print(f"{verdict}: {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

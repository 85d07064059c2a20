#!/usr/bin/env python3
"""What one emulated host's TCP connections carry, per destination, over time.

Samples `ss -tinH` inside the host's network namespace every INTERVAL seconds for DURATION seconds
and prints, for each interval in which a destination's connections moved data: the Mbit/s they
had acknowledged, the Mbit/s retransmitted, and their mean smoothed round trip (ms). Run it beside
a benchmark to see how a rank's links share its NIC (perf/RESULTS.md, "Paced sends").
  perf/wanem/link_rates.py NAMESPACE [DURATION=120] [INTERVAL=0.25]
  e.g. perf/wanem/link_rates.py hmcp-eu-0 120 &  perf/wanem/run.sh hmcp build/bin/hmc-perf ...
Needs root (ip netns exec).
"""
import collections
import re
import subprocess
import sys
import time

FIELDS = {'acked': r'bytes_acked:(\d+)', 'retrans': r'bytes_retrans:(\d+)', 'rtt': r' rtt:([\d.]+)'}


def sample(namespace):
    """Per destination address: bytes acked, bytes retransmitted, sum of srtt, connections."""
    listing = subprocess.run(['ip', 'netns', 'exec', namespace, 'ss', '-tinH'],
                             capture_output=True, text=True, check=True).stdout
    totals = collections.defaultdict(lambda: {'acked': 0, 'retrans': 0, 'rtt': 0.0, 'n': 0})
    peer = None
    for line in listing.splitlines():
        if line and not line[0].isspace():  # "STATE RECV-Q SEND-Q LOCAL PEER": a new connection.
            fields = line.split()
            peer = fields[4].rsplit(':', 1)[0] if len(fields) >= 5 else None
            continue
        if peer is None:
            continue
        entry = totals[peer]
        for name, pattern in FIELDS.items():
            match = re.search(pattern, line)
            if match:
                entry[name] += float(match.group(1)) if name == 'rtt' else int(match.group(1))
        entry['n'] += 1
    return totals


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    namespace = sys.argv[1]
    duration = float(sys.argv[2]) if len(sys.argv) > 2 else 120
    interval = float(sys.argv[3]) if len(sys.argv) > 3 else 0.25
    start = time.time()
    previous, previous_time = sample(namespace), 0.0
    print('# seconds  destination: acked Mbit/s (retransmitted Mbit/s, mean srtt ms) ...')
    while time.time() - start < duration:
        time.sleep(interval)
        now = time.time() - start
        current = sample(namespace)
        span = now - previous_time
        cells = []
        for peer in sorted(current):
            if peer not in previous:
                continue
            acked = (current[peer]['acked'] - previous[peer]['acked']) * 8 / span / 1e6
            if acked <= 0:
                continue
            retrans = (current[peer]['retrans'] - previous[peer]['retrans']) * 8 / span / 1e6
            rtt = current[peer]['rtt'] / max(1, current[peer]['n'])
            cells.append(f'{peer}: {acked:6.1f} ({retrans:4.1f}, {rtt:4.0f})')
        if cells:
            print(f'{now:7.2f}  ' + '  '.join(cells), flush=True)
        previous, previous_time = current, now


if __name__ == '__main__':
    main()

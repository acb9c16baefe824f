#!/usr/bin/env python3
"""Sends a burst of distinct GitHub push deliveries to a WorkFlowTrigger and prints one JSON
line: deliveries, connections, seconds, deliveries per second, answer p50/p99/max (ms), and
the answers by status.

Usage: scripts/trigger-burst.py URL SECRET [N=500] [CONNECTIONS=20] [PREFIX=burst]
URL is the trigger's, http://ADDR/triggers/NS/NAME; SECRET its GitHub webhook secret. Each of
CONNECTIONS threads keeps one HTTP/1.1 connection and sends its share one after another, all
threads at once; the same PREFIX sent again repeats the same deliveries (each answered 200).
"""
import hashlib, hmac, http.client, json, sys, threading, time, urllib.parse

url, secret = sys.argv[1], sys.argv[2].encode()
n = int(sys.argv[3]) if len(sys.argv) > 3 else 500
connections = int(sys.argv[4]) if len(sys.argv) > 4 else 20
prefix = sys.argv[5] if len(sys.argv) > 5 else "burst"
parsed = urllib.parse.urlparse(url)
ids = [f"{prefix}-{i:05d}" for i in range(n)]
lock = threading.Lock()
answers = []  # (status, seconds)
start_line = threading.Barrier(connections + 1)


def sender(mine):
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port)
    start_line.wait()
    for delivery in mine:
        body = json.dumps({"ref": "refs/heads/main", "after": delivery}).encode()
        signature = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
        headers = {
            "Content-Type": "application/json",
            "X-GitHub-Event": "push",
            "X-GitHub-Delivery": delivery,
            "X-Hub-Signature-256": signature,
        }
        began = time.perf_counter()
        conn.request("POST", parsed.path, body, headers)
        response = conn.getresponse()
        response.read()
        took = time.perf_counter() - began
        with lock:
            answers.append((response.status, took))


threads = [threading.Thread(target=sender, args=(ids[i::connections],)) for i in range(connections)]
for t in threads:
    t.start()
start_line.wait()
began = time.perf_counter()
for t in threads:
    t.join()
seconds = time.perf_counter() - began
times = sorted(t for _, t in answers)
statuses = {}
for status, _ in answers:
    statuses[str(status)] = statuses.get(str(status), 0) + 1
print(json.dumps({
    "deliveries": n,
    "connections": connections,
    "seconds": round(seconds, 3),
    "per_second": round(n / seconds, 1),
    "p50_ms": round(times[len(times) // 2] * 1000, 1),
    "p99_ms": round(times[min(len(times) - 1, len(times) * 99 // 100)] * 1000, 1),
    "max_ms": round(times[-1] * 1000, 1),
    "answers": statuses,
}))

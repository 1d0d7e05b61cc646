#!/usr/bin/env python3
"""A load client for fish serve (Python's standard library alone, so that it
runs on any machine with python3): N streamed /v1/completions requests from C
concurrent clients (threads, one keep-alive connection each), each asking for
exactly --max-tokens tokens (ignore_eos). Prints the aggregate generated
tokens per second, requests per second, time to first token and latency
percentiles, and each stream's own decode rate; --json for one JSON line.

    python3 tests/serve/load_client.py --url http://127.0.0.1:8080 -n 64 -c 8 --max-tokens 128
"""
import argparse
import http.client
import json
import sys
import threading
import time
import urllib.parse

PROMPTS = [
    "Once upon a time there was a little dog who lived near the sea. One day",
    "The old lighthouse keeper looked at the storm and said",
    "In the middle of the forest, a small fox found a shiny key. It",
    "Tom and his sister wanted to build the tallest tower of blocks in town, so",
]


def percentile(sorted_values, p):
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, max(0, int(-(-p * len(sorted_values) // 100)) - 1))
    return sorted_values[i]


def one_request(conn, path, i, args):
    body = {"model": "x", "prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": args.max_tokens, "temperature": 0.8,
            "seed": i, "stream": True, "ignore_eos": True}
    headers = {"Content-Type": "application/json"}
    if args.api_key:
        headers["Authorization"] = "Bearer " + args.api_key
    t0 = time.perf_counter()
    conn.request("POST", path, json.dumps(body), headers)
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:200]!r}")
    ttft = None
    tokens = 0
    while True:
        line = resp.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data: "):
            continue
        data = line[6:]
        if data == b"[DONE]":
            break
        chunk = json.loads(data)
        if "error" in chunk:
            raise RuntimeError(chunk["error"].get("message"))
        if ttft is None and chunk["choices"] and chunk["choices"][0].get("text"):
            ttft = time.perf_counter() - t0
        if chunk.get("usage"):
            tokens = chunk["usage"]["completion_tokens"]
    resp.read()
    return {"latency": time.perf_counter() - t0, "ttft": ttft, "tokens": tokens}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("-n", "--requests", type=int, default=64)
    ap.add_argument("-c", "--clients", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--api-key", default="")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per request at most")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    u = urllib.parse.urlparse(args.url)
    results, errors = [None] * args.requests, []
    next_i = [0]
    lock = threading.Lock()

    def worker():
        conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=args.timeout)
        while True:
            with lock:
                i = next_i[0]
                next_i[0] += 1
            if i >= args.requests:
                break
            try:
                results[i] = one_request(conn, "/v1/completions", i, args)
            except Exception as e:  # noqa: BLE001 - every failure is reported
                errors.append(f"request {i}: {e}")
                conn.close()
                conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=args.timeout)
        conn.close()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    done = [r for r in results if r]
    tokens = sum(r["tokens"] for r in done)
    lat = sorted(r["latency"] for r in done)
    ttft = sorted(r["ttft"] for r in done if r["ttft"] is not None)
    per_stream = sorted((r["tokens"] - 1) / (r["latency"] - r["ttft"]) for r in done
                        if r["ttft"] is not None and r["tokens"] > 1 and r["latency"] > r["ttft"])
    report = {
        "requests": args.requests, "clients": args.clients, "max_tokens": args.max_tokens, "ok": len(done),
        "errors": len(errors), "seconds": round(wall, 3), "requests_per_s": round(len(done) / wall, 2),
        "generated_tok_per_s": round(tokens / wall, 1),
        "ttft_ms": {p: round(1000 * percentile(ttft, p), 1) for p in (50, 90, 99)},
        "latency_ms": {p: round(1000 * percentile(lat, p), 1) for p in (50, 90, 99)},
        "stream_decode_tok_per_s_p50": round(percentile(per_stream, 50), 1),
    }
    if args.json:
        print(json.dumps(report))
    else:
        print(f"{len(done)}/{args.requests} requests from {args.clients} clients, {args.max_tokens} tokens each: "
              f"{wall:.2f} s, {report['requests_per_s']} req/s, {report['generated_tok_per_s']} generated tok/s; "
              f"time to first token ms p50/p90/p99 {report['ttft_ms'][50]}/{report['ttft_ms'][90]}/{report['ttft_ms'][99]}; "
              f"latency ms p50/p90/p99 {report['latency_ms'][50]}/{report['latency_ms'][90]}/{report['latency_ms'][99]}; "
              f"one stream decodes at {report['stream_decode_tok_per_s_p50']} tok/s (median)")
    for e in errors[:10]:
        print(e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

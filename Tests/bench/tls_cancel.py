#!/usr/bin/python3
"""Cancel latency over TLS: client close -> the HTTPS upstream sees the cancel, for httpVersion "1.1" and "2".

  make bench-tls            (or: python3 Tests/bench/tls_cancel.py .build/release/sse-relay [rounds])

For each version it starts the TLS test upstream (Tests/TestHarness/tls_upstream.py, python3-h2) with a
throwaway CA, and the relay with `httpVersion` and `caFile` set, then runs two cases:
  sequential  one stream at a time: read 2 events, close; the next starts once the cancel was seen
  concurrent  20 streams open together (one HTTP/2 connection), closed one by one while the rest stay open
Latency is upstream's event time (RST_STREAM or connection close) minus the client's close, both CLOCK_MONOTONIC.
A cancel the upstream never sees within 5 s counts as missed.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UPSTREAM = os.path.join(ROOT, "Tests/TestHarness/tls_upstream.py")


class Events:
    def __init__(self, stream):
        self.lines = []
        self.cond = threading.Condition()
        threading.Thread(target=self.read, args=(stream,), daemon=True).start()

    def read(self, stream):
        for line in stream:
            with self.cond:
                self.lines.append(line.split())
                self.cond.notify_all()

    def wait(self, match, timeout=5.0):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for fields in self.lines:
                    if match(fields):
                        return fields
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)


def certificates(directory):
    def openssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", f"{directory}/ca.key", "-out", f"{directory}/ca.pem", "-days", "2",
            "-subj", "/CN=Bench CA")
    openssl("req", *ec, "-keyout", f"{directory}/server.key", "-out", f"{directory}/server.csr", "-subj", "/CN=127.0.0.1")
    with open(f"{directory}/server.ext", "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", f"{directory}/server.csr", "-CA", f"{directory}/ca.pem", "-CAkey", f"{directory}/ca.key",
            "-CAcreateserial", "-out", f"{directory}/server.pem", "-days", "2", "-extfile", f"{directory}/server.ext")


def open_stream(port, path):
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    body = b'{"model":"m","stream":true}'
    sock.sendall(b"POST %s HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                 % (path.encode(), len(body), body))
    return sock


def read_until(sock, marker, timeout=10.0):
    sock.settimeout(timeout)
    data = b""
    while marker not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("relay closed the stream")
        data += chunk


def cancel_seen(events, request):
    conn, stream = request[2], request[3]
    return events.wait(lambda f: len(f) >= 3 and f[2] == conn and (
        (f[0] == "reset" and f[3] == stream) or f[0] == "closed"))


def measure(relay_bin, version, rounds, directory):
    upstream = subprocess.Popen(["/usr/bin/python3", UPSTREAM, "--cert", f"{directory}/server.pem",
                                 "--key", f"{directory}/server.key"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    events = Events(upstream.stdout)
    port = int(events.wait(lambda f: f[0] == "port")[1])
    config = {
        "listen": {"host": "127.0.0.1", "port": 0},
        "upstreams": {"p": {"baseURL": f"https://127.0.0.1:{port}", "httpVersion": version,
                            "caFile": f"{directory}/ca.pem"}},
        "routes": [{"prefix": "/v1/", "upstream": "p", "auth": "none"}],
        "workers": 1, "logLevel": "info",
    }
    with open(f"{directory}/relay.json", "w") as f:
        json.dump(config, f)
    relay = subprocess.Popen([relay_bin, "--config", f"{directory}/relay.json"], stdout=subprocess.PIPE, text=True,
                             stderr=subprocess.DEVNULL)
    relay_port = None
    for line in relay.stdout:
        if '"relay listening"' in line:
            relay_port = json.loads(line)["port"]
            break
    # Keep reading its log (one line per exchange), or the relay would block on a full pipe.
    threading.Thread(target=lambda: [None for _ in relay.stdout], daemon=True).start()
    results = {}
    try:
        counter = [0]

        def stream_request(tag):
            counter[0] += 1
            path = f"/v1/stream/{tag}/{counter[0]}"
            sock = open_stream(relay_port, path)
            request = events.wait(lambda f: f[0] == "request" and f[4] == path)
            read_until(sock, b"data: event 2\n\n")
            return sock, request

        def close_and_measure(sock, request, latencies):
            left = time.monotonic_ns()
            sock.close()
            seen = cancel_seen(events, request)
            if seen is None:
                latencies.append(None)
            else:
                latencies.append(((int(seen[1]) - left) / 1e6, seen[0]))

        sequential = []
        for i in range(rounds):
            sock, request = stream_request("seq")
            close_and_measure(sock, request, sequential)
        results["sequential"] = sequential

        concurrent = []
        for _ in range(max(1, rounds // 20)):
            opened = [stream_request("conc") for _ in range(20)]
            for sock, request in opened:
                close_and_measure(sock, request, concurrent)
        results["concurrent"] = concurrent
    finally:
        relay.terminate()
        relay.wait()
        upstream.stdin.close()
        upstream.terminate()
        upstream.wait()
    return results


def summary(latencies):
    seen = sorted(l[0] for l in latencies if l is not None)
    missed = sum(1 for l in latencies if l is None)
    kinds = {}
    for l in latencies:
        if l is not None:
            kinds[l[1]] = kinds.get(l[1], 0) + 1
    if not seen:
        return f"none seen, {missed} missed"
    pct = lambda p: seen[min(len(seen) - 1, int(round(p / 100 * (len(seen) - 1))))]
    return (f"n={len(latencies)} p50={pct(50):.2f} ms p99={pct(99):.2f} ms max={seen[-1]:.2f} ms "
            f"missed={missed} seen-as={kinds}")


def main():
    relay_bin = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".build/release/sse-relay")
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    with tempfile.TemporaryDirectory() as directory:
        certificates(directory)
        for version in ("1.1", "2"):
            results = measure(relay_bin, version, rounds, directory)
            for case, latencies in results.items():
                print(f"httpVersion {version:3} {case:10}  {summary(latencies)}")


if __name__ == "__main__":
    main()

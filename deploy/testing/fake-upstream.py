#!/usr/bin/env python3
"""A tiny OpenAI-compatible streaming provider on 127.0.0.1, for deploy/check-image-steps.sh only.

Usage: fake-upstream.py KEY_FILE PORT_FILE
Answers POST .../chat/completions with Server-Sent Events (chunked), after checking that the request carries
`Authorization: Bearer <contents of KEY_FILE>` (so the relay's key-from-file path is exercised end to end).
The model name picks the behaviour:
  any model         12 events, 60 ms apart
  "slow"            30 events, 100 ms apart (a stream in flight while the relay drains)
  "very-slow"       200 events, 100 ms apart
  "buffered"        all events in one write after 700 ms (what a buffering proxy looks like to a client)
Writes the port it listens on to PORT_FILE. Standard library only.
"""
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KEY_FILE, PORT_FILE = sys.argv[1], sys.argv[2]


def expected_key():
    with open(KEY_FILE) as f:
        return f.read().strip()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet
        pass

    def _json(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.headers.get("Authorization") != "Bearer " + expected_key():
            return self._json(401, {"error": {"message": "fake upstream: wrong or missing key",
                                              "type": "invalid_request_error", "code": "invalid_api_key"}})
        if not self.path.endswith("/chat/completions"):
            return self._json(404, {"error": {"message": "fake upstream: no such path " + self.path}})
        try:
            request = json.loads(raw or b"{}")
        except ValueError:
            return self._json(400, {"error": {"message": "fake upstream: body is not JSON"}})
        model = request.get("model", "")
        count, pace = {"slow": (30, 0.1), "very-slow": (200, 0.1)}.get(model, (12, 0.06))
        events = []
        for i in range(count):
            delta = {"content": "%d " % (i + 1)}
            chunk = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": model,
                     "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
            events.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        events.append(b"data: [DONE]\n\n")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            if model == "buffered":
                time.sleep(0.7)
                self._chunk(b"".join(events))
            else:
                for event in events:
                    self._chunk(event)
                    time.sleep(pace)
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.replace(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()

#!/usr/bin/env python3
"""A provider that thinks quietly: streams an OpenAI chat answer (any path with "chat/completions") or an
Anthropic Messages answer (any path with "/messages"), with a silence of PAUSE seconds after the first event.
Prints its port on stdout, then serves until killed. Writes each answer body it sent to DIR/<n>.body, so the
caller can compare what reached the client with what the provider sent.

Usage: paused_provider.py PAUSE DIR
"""
import json
import socketserver
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

PAUSE = float(sys.argv[1])
DIR = sys.argv[2]
COUNT = [0]
WORDS = ["Quiet ", "models ", "think ", "before ", "they ", "speak."]


def openai_events():
    for i, word in enumerate(WORDS):
        chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "gpt-4o-mini",
                 "choices": [{"index": 0, "delta": {"content": word},
                              "finish_reason": "stop" if i == len(WORDS) - 1 else None}]}
        yield ("data: " + json.dumps(chunk) + "\n\n").encode()
    yield b"data: [DONE]\n\n"


def anthropic_events():
    def event(name, obj):
        return ("event: " + name + "\ndata: " + json.dumps(obj) + "\n\n").encode()
    yield event("message_start", {"type": "message_start", "message": {
        "id": "m1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5", "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 1}}})
    yield event("content_block_start", {"type": "content_block_start", "index": 0,
                                        "content_block": {"type": "text", "text": ""}})
    for word in WORDS:
        yield event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                            "delta": {"type": "text_delta", "text": word}})
    yield event("content_block_stop", {"type": "content_block_stop", "index": 0})
    yield event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                  "usage": {"output_tokens": 6}})
    yield event("message_stop", {"type": "message_stop"})


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
        events = anthropic_events() if "/messages" in self.path else openai_events()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = b""
        for i, data in enumerate(events):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
            sent += data
            if i == 0:
                time.sleep(PAUSE)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        COUNT[0] += 1
        with open("%s/%d.body" % (DIR, COUNT[0]), "wb") as f:
            f.write(sent)


class Server(socketserver.ThreadingMixIn, HTTPServer):
    daemon_threads = True


server = Server(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()

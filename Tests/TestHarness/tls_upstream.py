#!/usr/bin/python3
"""A TLS upstream for the relay's tests: HTTP/2 (python3-h2) and HTTP/1.1, chosen by ALPN.

Started by TLSUpstream.swift as a child process. It prints one line per event on stdout (flushed), each
stamped with time.monotonic_ns() (CLOCK_MONOTONIC, the clock the tests read):

  port P                          listening on 127.0.0.1:P
  open T C PROTO RESUMED          connection C accepted, ALPN chose PROTO ("h2" or "http/1.1"); RESUMED is
                                  "resumed" when the client resumed an earlier TLS session, else "full"
  request T C S PATH              a complete request on connection C, stream S (1 for HTTP/1.1)
  reset T C S CODE                the client reset stream S (RST_STREAM with error CODE)
  closed T C                      the client closed connection C (EOF or TCP reset)
  done T C S                      the server sent the whole response on stream S
  idle-closed T C                 the server closed idle connection C (GOAWAY first on HTTP/2)
  goaway T C                      the server sent GOAWAY on idle HTTP/2 connection C and kept it open
  stale T C                       idle HTTP/1.1 connection C holds a stale answer the client has not asked for:
                                  written as a TLS record of its own, every byte acknowledged by the client's kernel

Paths script the answer (a path containing):
  /hold     read the request, answer nothing (a model that has not started)
  /drop     read the request, then close the connection without an answer (a provider dying mid-request)
  /stream   200 text/event-stream, one event at once, then one every 100 ms for up to 60 s
  /excess   HTTP/1.1: 200 {"ok":true} (Content-Length), its head a TLS record of its own and its body in one
            record with a second, unasked-for answer after it (a provider that writes more than its length)
  other     200 application/json {"ok":true} (Content-Length), connection kept alive

Commands on stdin:
  close-idle   close every connection that has no stream in progress (a provider's keep-alive timeout)
  goaway-idle  send GOAWAY on every idle HTTP/2 connection, keeping it open (a provider shutting down)
  stale-idle   write a second, unasked-for answer on every idle HTTP/1.1 connection (a provider that answers twice)
"""
import argparse
import fcntl
import select
import socket
import ssl
import sys
import termios
import threading
import time

import h2.config
import h2.connection
import h2.events

LOCK = threading.Lock()
CONNECTIONS = []
STREAM_PACE = 0.1
STREAM_EVENTS = 600


def emit(*fields):
    line = " ".join(str(f) for f in fields)
    with LOCK:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def now():
    return time.monotonic_ns()


class Connection:
    def __init__(self, index, sock):
        self.index = index
        self.sock = sock
        self.close_idle = False
        self.goaway_idle = False
        self.stale_idle = False
        self.streams = {}  # stream id -> (path, next event time, events sent)

    def readable(self, timeout):
        if self.sock.pending():
            return True
        r, _, _ = select.select([self.sock], [], [], timeout)
        return bool(r)

    def next_timeout(self):
        deadlines = [s[1] for s in self.streams.values() if s[1] is not None]
        if not deadlines:
            return 0.02
        return max(0.0, min(min(deadlines) - time.monotonic(), 0.02))

    def recv(self):
        try:
            return self.sock.recv(65536)
        except (ConnectionError, ssl.SSLError, OSError):
            return b""


class H2Connection(Connection):
    def run(self):
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        self.conn = conn
        self.last_stream = 0
        conn.initiate_connection()
        self.flush()
        while True:
            if self.close_idle and not self.streams:
                conn.close_connection(last_stream_id=self.last_stream)
                self.flush()
                # Closed before it is reported: a test that sends its next request on seeing the event must
                # find the connection already closed, never still open for reuse.
                self.sock.close()
                emit("idle-closed", now(), self.index)
                return
            if self.goaway_idle and not self.streams:
                # GOAWAY alone: the connection stays open, and no new stream may start on it.
                self.goaway_idle = False
                conn.close_connection(last_stream_id=self.last_stream)
                self.flush()
                emit("goaway", now(), self.index)
            if self.readable(self.next_timeout()):
                data = self.recv()
                if not data:
                    emit("closed", now(), self.index)
                    return
                for event in conn.receive_data(data):
                    self.handle(event)
                self.flush()
            self.tick()

    def flush(self):
        out = self.conn.data_to_send()
        if out:
            self.sock.sendall(out)

    def handle(self, event):
        if isinstance(event, h2.events.RequestReceived):
            headers = dict(event.headers)
            path = headers.get(":path", "/")
            self.last_stream = max(self.last_stream, event.stream_id)
            # h2 reports the request's end as a separate StreamEnded event, with or without a body.
            self.streams[event.stream_id] = [path, None, 0]
        elif isinstance(event, h2.events.DataReceived):
            self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            if event.stream_id in self.streams:
                self.start(event.stream_id)
        elif isinstance(event, h2.events.StreamReset):
            emit("reset", now(), self.index, event.stream_id, int(event.error_code))
            self.streams.pop(event.stream_id, None)

    def start(self, sid):
        path = self.streams[sid][0]
        emit("request", now(), self.index, sid, path)
        if "/drop" in path:
            self.sock.shutdown(socket.SHUT_RDWR)
            return
        if "/hold" in path:
            return
        if "/stream" in path:
            self.conn.send_headers(sid, [(":status", "200"), ("content-type", "text/event-stream")])
            self.streams[sid][1] = time.monotonic()
            return
        body = b'{"ok":true}'
        self.conn.send_headers(sid, [(":status", "200"), ("content-type", "application/json"),
                                     ("content-length", str(len(body)))])
        self.conn.send_data(sid, body, end_stream=True)
        self.streams.pop(sid, None)
        self.flush()
        emit("done", now(), self.index, sid)

    def tick(self):
        t = time.monotonic()
        for sid, s in list(self.streams.items()):
            if s[1] is None or s[1] > t:
                continue
            s[2] += 1
            last = s[2] >= STREAM_EVENTS
            self.conn.send_data(sid, b"data: event %d\n\n" % s[2], end_stream=last)
            s[1] = t + STREAM_PACE
            if last:
                self.streams.pop(sid, None)
                emit("done", now(), self.index, sid)
        self.flush()


class H1Connection(Connection):
    def run(self):
        buf = b""
        while True:
            if self.close_idle and not self.streams and not buf:
                self.sock.close()
                emit("idle-closed", now(), self.index)
                return
            if self.stale_idle and not self.streams and not buf:
                self.stale_idle = False
                body = b'{"stale":true}'
                self.sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                                  % (len(body), body))
                # Reported once the bytes wait in the client's socket, not merely queued here.
                while fcntl.ioctl(self.sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0") != b"\0\0\0\0":
                    time.sleep(0.001)
                emit("stale", now(), self.index)
            if self.readable(self.next_timeout()):
                data = self.recv()
                if not data:
                    emit("closed", now(), self.index)
                    return
                buf += data
                while True:
                    end = buf.find(b"\r\n\r\n")
                    if end < 0 or self.streams:
                        break
                    head = buf[:end].decode("latin-1").split("\r\n")
                    length = 0
                    for line in head[1:]:
                        name, _, value = line.partition(":")
                        if name.strip().lower() == "content-length":
                            length = int(value.strip())
                    if len(buf) < end + 4 + length:
                        break
                    buf = buf[end + 4 + length:]
                    self.start(head[0].split(" ")[1])
            self.tick()

    def start(self, path):
        emit("request", now(), self.index, 1, path)
        if "/drop" in path:
            self.sock.shutdown(socket.SHUT_RDWR)
            return
        if "/hold" in path:
            self.streams[1] = [path, None, 0]
            return
        if "/stream" in path:
            self.sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            self.streams[1] = [path, time.monotonic(), 0]
            return
        body = b'{"ok":true}'
        if "/excess" in path:
            stale = b'{"stale":true}'
            self.sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
            self.sock.sendall(body + b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                              % (len(stale), stale))
            emit("done", now(), self.index, 1)
            return
        self.sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                          % (len(body), body))
        emit("done", now(), self.index, 1)

    def tick(self):
        s = self.streams.get(1)
        if not s or s[1] is None or s[1] > time.monotonic():
            return
        s[2] += 1
        event = b"data: event %d\n\n" % s[2]
        self.sock.sendall(b"%x\r\n%s\r\n" % (len(event), event))
        s[1] = time.monotonic() + STREAM_PACE
        if s[2] >= STREAM_EVENTS:
            self.sock.sendall(b"0\r\n\r\n")
            self.streams.pop(1)
            emit("done", now(), self.index, 1)


def serve(listener, context):
    index = 0
    while True:
        raw, _ = listener.accept()
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            sock = context.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            continue
        proto = sock.selected_alpn_protocol() or "http/1.1"
        connection = (H2Connection if proto == "h2" else H1Connection)(index, sock)
        index += 1
        with LOCK:
            CONNECTIONS.append(connection)
        emit("open", now(), connection.index, proto, "resumed" if sock.session_reused else "full")
        threading.Thread(target=run_connection, args=(connection,), daemon=True).start()


def run_connection(connection):
    try:
        connection.run()
    except (ConnectionError, ssl.SSLError, OSError):
        emit("closed", now(), connection.index)
    finally:
        try:
            connection.sock.close()
        except OSError:
            pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--http1-only", action="store_true", help="offer only http/1.1 in ALPN (a provider without h2)")
    args = parser.parse_args()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(args.cert, args.key)
    context.set_alpn_protocols(["http/1.1"] if args.http1_only else ["h2", "http/1.1"])
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    emit("port", listener.getsockname()[1])
    threading.Thread(target=serve, args=(listener, context), daemon=True).start()
    for line in sys.stdin:
        if line.strip() == "close-idle":
            with LOCK:
                for connection in CONNECTIONS:
                    connection.close_idle = True
        elif line.strip() == "goaway-idle":
            with LOCK:
                for connection in CONNECTIONS:
                    connection.goaway_idle = True
        elif line.strip() == "stale-idle":
            with LOCK:
                for connection in CONNECTIONS:
                    connection.stale_idle = True
    # stdin closed: the test is over.


if __name__ == "__main__":
    main()

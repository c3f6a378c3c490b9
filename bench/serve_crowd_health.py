#!/usr/bin/env python3
"""Whether a tern-serve binary answers /health while N connections each hold half a header.

Starts BINARY on 127.0.0.1 with MODEL, opens N connections that each send the start of a request
and then nothing, and asks /health on a fresh connection with an 8-second limit; prints how long
the answer took, or that none came. A server with a thread per connection gives none once N
reaches its threads; tern-serve's event loop answers at once.

  python3 bench/serve_crowd_health.py build/bin/tern-serve MODEL.tern 300
"""
import re
import socket
import subprocess
import sys
import time


def main():
    binary, model, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    server = subprocess.Popen([binary, "--model", "m=" + model, "--listen", "127.0.0.1:0",
                               "--threads", "1"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        port = int(re.search(r":(\d+)\s*$", server.stdout.readline()).group(1))
        time.sleep(2)  # the model loads
        crowd = []
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            crowd.append(s)
        time.sleep(1)
        start = time.time()
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=8)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            status = s.recv(15).decode(errors="replace")
            print("%s, %d half-header connections: /health %r after %.3f s" %
                  (binary, n, status, time.time() - start))
        except OSError as e:
            print("%s, %d half-header connections: /health unanswered after %.1f s (%s)" %
                  (binary, n, time.time() - start, e))
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    sys.exit(main())

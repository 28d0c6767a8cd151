"""A loopback proxy that adds `Authorization: Bearer $TOKEN` to every request.

For clients with no header option (the MCP conformance suite). Host and Origin
pass through unchanged, so the daemon's DNS-rebinding check sees what the
client sent. Stdlib only.

    TOKEN=<64 hex> python3 authproxy.py LISTEN_PORT UPSTREAM_PORT
"""

import http.client
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN = os.environ["TOKEN"]
UPSTREAM = int(sys.argv[2])
# Hop-by-hop headers are the proxy's own business on each side.
HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}


class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def forward(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP | {"authorization"}}
        headers["Authorization"] = "Bearer " + TOKEN
        try:
            # http.client sends our Host header as given (it adds none of its own).
            up = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=60)
            up.request(self.command, self.path, body=body, headers=headers)
            resp = up.getresponse()
            status, resp_headers, data = resp.status, resp.getheaders(), resp.read()
            up.close()
        except OSError as e:
            status, resp_headers, data = 502, [("Content-Type", "text/plain")], f"authproxy: {e}\n".encode()
        self.send_response(status)
        for k, v in resp_headers:
            # send_response already wrote Date and Server.
            if k.lower() not in HOP | {"content-length", "date", "server"}:
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = do_HEAD = forward


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Proxy).serve_forever()

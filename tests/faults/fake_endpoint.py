"""A grid-endpoint/1 fake for the fault suite: serves the vocabulary document it is given
(GET /v1/vocabulary) and answers every step request (POST /v1/step) with one fault.

    python3 fake_endpoint.py MODE PORT VOCABULARY_JSON

MODE: hang (never answers), 5xx, malformed (200, not JSON), truncated (announces more body
than it sends), fingerprint (the protocol's vocabulary mismatch, 409), disconnect (closes
without a word). Prints "ready" once it listens.
"""
import http.server
import socketserver
import sys
import time

mode, port, vocab_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
VOCAB = open(vocab_file, "rb").read()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(VOCAB)))
        self.end_headers()
        self.wfile.write(VOCAB)

    def reply(self, status, body):
        b = body.encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(b)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(b)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        if mode == "hang":
            time.sleep(600)
        elif mode == "5xx":
            self.reply(500, '{"error":{"code":"internal","message":"injected"}}')
        elif mode == "malformed":
            self.reply(200, "this is not json")
        elif mode == "truncated":
            self.send_response(200)
            self.send_header("content-length", "400")
            self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(b'{"results":[')
        elif mode == "fingerprint":
            self.reply(409, '{"error":{"code":"vocab_mismatch","message":"other vocabulary",'
                            '"server_fingerprint":"00000000000000000000000000000000"}}')
        elif mode == "disconnect":
            self.close_connection = True
            self.connection.shutdown(2)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


server = Server(("127.0.0.1", port), Handler)
print("ready", flush=True)
server.serve_forever()

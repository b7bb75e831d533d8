#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# spec_lib.py: what the by-hand speculation checks (spec_logprobs.py, spec_structured.py) share:
# a `glint serve` on a model with extra flags, started on a free loopback port (bounded wait), and
# one HTTP request to it (non-200 raises with the body's start), a reply's JSON objects, and where
# two replies first differ.
import http.client
import json
import re
import signal
import subprocess
import tempfile
import time


class Server:
    def __init__(self, glint, model, extra):
        self.log = tempfile.TemporaryFile("w+")
        self.p = subprocess.Popen(
            [glint, "serve", "--model", model, "--host", "127.0.0.1", "--port", "0",
             "--kv-cache-dtype", "f32", "--deep-health-interval", "0", "--shutdown-timeout", "2"]
            + extra, stdout=self.log, stderr=subprocess.STDOUT)
        deadline, self.port = time.time() + 90, None
        while time.time() < deadline and self.p.poll() is None and not self.port:
            self.log.seek(0)
            m = re.search(r"serving .* at http://127\.0\.0\.1:(\d+)", self.log.read())
            self.port = int(m.group(1)) if m else None
            time.sleep(0.1)
        if not self.port:
            self.stop()
            raise SystemExit("server did not start")

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(15)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(5)


def request(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        c.request("POST" if body is not None else "GET", path,
                  json.dumps(body) if body is not None else None,
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read().decode()
        if r.status != 200:
            raise RuntimeError(f"{path}: HTTP {r.status}: {data[:300]}")
        return data
    finally:
        c.close()


def reply_objects(port, path, body):
    """POSTs body; the reply's JSON objects: the one body, or a stream's data events in order (an
    error object in either raises)."""
    data = request(port, path, body)
    objs = [json.loads(data)] if not body.get("stream") else [
        json.loads(l[6:]) for l in data.split("\n") if l.startswith("data: ") and l != "data: [DONE]"]
    for o in objs:
        if "error" in o:
            raise RuntimeError(f"error: {o}")
    return objs


def print_difference(what, off, on):
    """Prints where replies off and on (JSON-able) first differ, 150 characters either side."""
    ja, js = json.dumps(off), json.dumps(on)
    at = next((i for i in range(min(len(ja), len(js))) if ja[i] != js[i]), min(len(ja), len(js)))
    lo = max(0, at - 150)
    print(f"  DIFFER {what} at char {at}:\n    off ...{ja[lo:at + 150]}\n    on  ...{js[lo:at + 150]}")

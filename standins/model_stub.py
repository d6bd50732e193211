#!/usr/bin/env python3
"""model_stub.py - a stand-in for the model API: a scripted server that speaks the documented
OpenAI chat-completions and Anthropic Messages wire formats (standard library only).

`autopatch demo` runs it to replay the recorded calc session (scripts/calc_happy.json) unless a
real model is configured, and the tests run it in place of a real provider.

It replays a script, records every request, and can answer 429 / 5xx / 529 on demand, so tests
can drive autopatch's Planner and Builder deterministically and assert what was offered to
whom.

Endpoints
    POST /v1/chat/completions   OpenAI format (also /chat/completions)
    POST /v1/messages           Anthropic format (also /messages)
    GET  /_stub/requests        every request so far: [{"path", "provider", "role", "headers",
                                "body", "bytes", "usage"}], body = the parsed JSON request,
                                bytes = its size as sent, usage = {"in", "out"} as answered
                                (null when the reply carried none)
    POST /_stub/script          replace the script (body: the script JSON); resets counters
    POST /_stub/reset           forget recorded requests and restart the script

Role detection: the system prompt (OpenAI: the first "system" message; Anthropic: "system")
containing "You are the Planner" -> role "planner", "You are the Builder" -> "builder", else
"other".

Script format (JSON file or object):

    {
      "planner": [STEP, ...],       # replies for the Planner's requests, in order
      "builder": [STEP, ...],       # replies for the Builder's requests, in order
      "other":   [STEP, ...]
    }

    STEP = {
      "text": "...",                          # optional assistant text
      "tool_calls": [                         # optional tool calls
        {"name": "read_file", "arguments": {"path": "calc.py"}}   # object -> JSON-encoded
        {"name": "read_file", "arguments": "{not json"}            # string -> sent verbatim
      ],
      "status": 429,                # optional: answer this HTTP error instead of a reply
      "retry_after": 1,             #   with this retry-after header (seconds)
      "repeat": true,               # optional: replay this step forever (never consumed);
                                    #   "{n}" in argument strings becomes a counter 1, 2, ...
      "usage": {"in": 100, "out": 20},  # optional token counts (else estimated from sizes);
                                        #   "omit" sends a reply without any usage
      "delay_s": 2                  # optional: wait this long before answering (a slow model)
    }

    A script may also say "omit_usage": true (every reply without usage, like servers that
    report none), and StubServer(script, omit_usage=True) does the same.

When a role's steps run out the stub answers HTTP 500 with {"error": "script exhausted"} and
records it, so a test fails loudly instead of hanging.

Ids and reasons follow the real services: OpenAI "chatcmpl-...", tool call ids "call_...",
finish_reason "tool_calls" or "stop", usage prompt_tokens / completion_tokens / total_tokens;
Anthropic "msg_...", tool_use ids "toolu_...", stop_reason "tool_use" or "end_turn", usage
input_tokens / output_tokens; errors in each service's error envelope (529 "overloaded_error").

Run standalone:  python3 standins/model_stub.py --port 8399 --script standins/scripts/calc_happy.json
Then: AUTOPATCH_LLM_BASE_URL=http://127.0.0.1:8399/v1 (openai) or http://127.0.0.1:8399
(anthropic). In tests: `StubServer(script).start()` -> .url, .requests(), .stop().
"""
import argparse
import copy
import json
import secrets
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _role_of(provider, body):
    system = ""
    if provider == "anthropic":
        s = body.get("system", "")
        if isinstance(s, list):
            s = " ".join(b.get("text", "") for b in s if isinstance(b, dict))
        system = s or ""
    else:
        for m in body.get("messages", []):
            if m.get("role") == "system":
                c = m.get("content")
                system = c if isinstance(c, str) else json.dumps(c)
                break
    if "You are the Planner" in system:
        return "planner"
    if "You are the Builder" in system:
        return "builder"
    return "other"


class Script:
    """Per-role step queues with repeat support."""

    def __init__(self, script):
        self.steps = {k: list(v) for k, v in (script or {}).items() if isinstance(v, list)}
        self.pos = {k: 0 for k in self.steps}
        self.counter = 0
        self.lock = threading.Lock()

    def next(self, role):
        with self.lock:
            steps = self.steps.get(role, [])
            i = self.pos.get(role, 0)
            if i >= len(steps):
                return None
            step = steps[i]
            if not step.get("repeat"):
                self.pos[role] = i + 1
            self.counter += 1
            return self._expand(copy.deepcopy(step), self.counter)

    @staticmethod
    def _expand(step, n):
        def sub(v):
            if isinstance(v, str):
                return v.replace("{n}", str(n))
            if isinstance(v, dict):
                return {k: sub(x) for k, x in v.items()}
            if isinstance(v, list):
                return [sub(x) for x in v]
            return v

        if step.get("repeat"):
            step["tool_calls"] = sub(step.get("tool_calls", []))
            if "text" in step:
                step["text"] = sub(step["text"])
        return step


class StubServer:
    def __init__(self, script=None, port=0, host="127.0.0.1", omit_usage=False):
        self.omit_usage = omit_usage or bool((script or {}).get("omit_usage"))
        self.script = Script(script)
        self.recorded = []
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):  # quiet
                pass

            def _send(self, status, obj, headers=None):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/_stub/requests":
                    with stub.lock:
                        self._send(200, stub.recorded)
                    return
                self._send(404, {"error": "not found"})

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(n) if n else b""
                if self.path == "/_stub/script":
                    stub.script = Script(json.loads(raw or b"{}"))
                    with stub.lock:
                        stub.recorded = []
                    self._send(200, {"ok": True})
                    return
                if self.path == "/_stub/reset":
                    stub.script = Script({k: v for k, v in stub.script.steps.items()})
                    with stub.lock:
                        stub.recorded = []
                    self._send(200, {"ok": True})
                    return
                if self.path.endswith("/chat/completions"):
                    provider = "openai"
                elif self.path.endswith("/messages"):
                    provider = "anthropic"
                else:
                    self._send(404, {"error": "unknown path " + self.path})
                    return
                try:
                    body = json.loads(raw)
                except ValueError:
                    self._send(400, {"error": "request body is not JSON"})
                    return
                role = _role_of(provider, body)
                rec = {
                    "path": self.path,
                    "provider": provider,
                    "role": role,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": body,
                    "bytes": len(raw),
                    "usage": None,
                    "time": time.time(),
                }
                step = stub.script.next(role)
                rec["status"] = (step or {}).get("status", 200 if step else 500)
                with stub.lock:
                    stub.recorded.append(rec)
                if step is None:
                    self._send(500, _error(provider, 500, "script exhausted for role " + role))
                    return
                if step.get("delay_s"):
                    time.sleep(float(step["delay_s"]))
                if step.get("status"):
                    st = int(step["status"])
                    hdrs = {}
                    if "retry_after" in step:
                        hdrs["retry-after"] = str(step["retry_after"])
                    self._send(st, _error(provider, st, "scripted error"), hdrs)
                    return
                if stub.omit_usage:
                    step["usage"] = "omit"
                reply = _reply(provider, body, step, len(raw))
                u = reply.get("usage")
                if u:
                    rec["usage"] = ({"in": u["input_tokens"], "out": u["output_tokens"]}
                                    if provider == "anthropic" else
                                    {"in": u["prompt_tokens"], "out": u["completion_tokens"]})
                self._send(200, reply)

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        # serve_forever accepts after select() said a connection waits; when none is there any
        # more, a blocking accept() would hang the thread and then shutdown() forever.
        self.httpd.socket.settimeout(1.0)
        self.port = self.httpd.server_address[1]
        self.thread = None

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def start(self):
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def requests(self):
        with self.lock:
            return copy.deepcopy(self.recorded)


def _error(provider, status, message):
    if provider == "anthropic":
        etype = {
            429: "rate_limit_error",
            529: "overloaded_error",
            400: "invalid_request_error",
        }.get(status, "api_error")
        return {"type": "error", "error": {"type": etype, "message": message}}
    etype = "rate_limit_exceeded" if status == 429 else "server_error"
    return {"error": {"message": message, "type": etype, "param": None, "code": etype}}


def _args_text(args):
    return args if isinstance(args, str) else json.dumps(args if args is not None else {})


def _reply(provider, body, step, req_len):
    text = step.get("text")
    calls = step.get("tool_calls") or []
    omit = step.get("usage") == "omit"
    usage = {} if omit else (step.get("usage") or {})
    tin = int(usage.get("in", max(1, req_len // 4)))
    tout = int(usage.get("out", max(1, len(json.dumps(step)) // 4)))
    model = body.get("model", "stub-model")
    if provider == "anthropic":
        content = []
        if text:
            content.append({"type": "text", "text": text})
        for c in calls:
            a = c.get("arguments", {})
            if isinstance(a, str):
                # The Messages API always carries input as an object; a malformed string is
                # sent as an object with a wrong-typed field so the client's checks still run.
                try:
                    a = json.loads(a)
                except ValueError:
                    a = {"_malformed": a}
            content.append(
                {"type": "tool_use", "id": "toolu_" + secrets.token_hex(12), "name": c["name"],
                 "input": a}
            )
        reply = {
            "id": "msg_" + secrets.token_hex(12),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": tin, "output_tokens": tout},
        }
        if omit:
            del reply["usage"]
        return reply
    message = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {
                "id": "call_" + secrets.token_hex(12),
                "type": "function",
                "function": {"name": c["name"], "arguments": _args_text(c.get("arguments", {}))},
            }
            for c in calls
        ]
    reply = {
        "id": "chatcmpl-" + secrets.token_hex(12),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if calls else "stop",
            }
        ],
        "usage": {"prompt_tokens": tin, "completion_tokens": tout, "total_tokens": tin + tout},
    }
    if omit:
        del reply["usage"]
    return reply


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--script", help="script JSON file")
    args = ap.parse_args()
    script = {}
    if args.script:
        with open(args.script, encoding="utf-8") as f:
            script = json.load(f)
    srv = StubServer(script, port=args.port)
    print("model stub listening on %s" % srv.url, flush=True)
    try:
        srv.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

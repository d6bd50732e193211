"""End to end: what `autopatch serve` writes to its log goes through the redaction layer.

The real binary is configured with secrets (both webhook secrets, a model key, and an App
private key written the .env way, with literal \\n), then receives signed deliveries whose
repository name carries those secrets, their encoded forms and token-shaped strings. The
server logs the repository in its "job queued" line; the log must show "***" there, never the
text, and every line must still be one JSON object.
"""
import base64
import copy
import json
import random
import secrets
import string
import subprocess
import urllib.parse

from server_util import SECRET, Server, examples


def _labeled(issue, repo):
    p = copy.deepcopy(next(e for e in examples("issues") if e["action"] == "labeled"))
    p.setdefault("installation", {"id": 4242})
    p["issue"]["number"] = issue
    p["repository"]["full_name"] = repo
    return p


def test_serve_log_masks_secrets_encodings_and_tokens(autopatch_bin, tmp_path, port):
    rnd = random.Random(7)
    alnum = string.ascii_letters + string.digits
    key = subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt",
                          "rsa_keygen_bits:1024"], capture_output=True, text=True,
                         check=True).stdout
    llm_key = "llm-" + secrets.token_hex(16)
    previous = "prev-secret-" + secrets.token_hex(8)
    key_line = key.splitlines()[2]  # a body line: only registration can catch it
    leaks = {
        "webhook secret": SECRET,
        "previous webhook secret": previous,
        "model key": llm_key,
        "model key, base64": base64.b64encode(llm_key.encode()).decode(),
        # inside base64("x" + key): the characters that encode key bits only
        "model key, base64 at offset 1":
            base64.b64encode(b"x" + llm_key.encode()).decode()[2:(1 + len(llm_key)) * 8 // 6],
        "private key line": key_line,
        "private key line, URL-encoded": urllib.parse.quote(key_line, safe=""),
        "GitHub token": "ghp_" + "".join(rnd.choice(alnum) for _ in range(36)),
        "installation token": "ghs_" + "".join(rnd.choice(alnum) for _ in range(36)),
        "AWS key id": "AKIA" + "".join(rnd.choice(string.ascii_uppercase + "234567")
                                       for _ in range(16)),
        "Anthropic key": "sk-ant-api03-" + "".join(rnd.choice(alnum) for _ in range(40)),
    }
    srv = Server(autopatch_bin, tmp_path, port, AUTOPATCH_LABEL="bug",
                 WEBHOOK_SECRET_PREVIOUS=previous, AUTOPATCH_LLM_API_KEY=llm_key,
                 PRIVATE_KEY=key.replace("\n", "\\n")).start()
    try:
        for i, leak in enumerate(leaks.values()):
            status, _ = srv.post(_labeled(1000 + i, f"octo/x-{leak} y"))
            assert status == 202
    finally:
        assert srv.stop() == 0
    log = srv.log_text()
    queued = []
    for line in log.splitlines():
        entry = json.loads(line)  # still one JSON object per line
        if entry["msg"].startswith("job queued"):
            queued.append(entry["msg"])
    assert len(queued) == len(leaks)
    for name, leak in leaks.items():
        assert leak not in log, f"{name} reached the log"
    for msg in queued:
        assert msg.startswith("job queued: label octo/x-*** y#"), msg

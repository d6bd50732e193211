"""Sign-in state nobody else can evict (issue 29, item 4), over plain HTTP against the GitHub
stand-in's OAuth endpoints.

The pending sign-in lives in the browser that started it, as a cookie the server signed
(server/signin.h): nothing is kept per anonymous client, so a flood of GET /login pushes out
nobody's sign-in. The cookie's key is HKDF-SHA256 of GITHUB_CLIENT_SECRET, so another replica
of the same App accepts it; and the refusals at the callback say what went wrong: another
browser's state, an expired cookie, a cookie this server did not sign."""
import hashlib
import hmac
import http.client
import re
import time
import urllib.parse
import urllib.request

from console_util import Visitor, register_app
from github_stub import GitHubStub
from server_util import Server, free_port

SALT, INFO = b"autopatch console sign-in", b"ap_login state cookie v1"  # docs/security.md


def key_of(client_secret):
    """The documented key derivation, HKDF-SHA256 (RFC 5869) with one block."""
    prk = hmac.new(SALT, client_secret.encode(), hashlib.sha256).digest()
    return hmac.new(prk, INFO + b"\x01", hashlib.sha256).digest()


def cookie_for(client_secret, state, expires):
    mac = hmac.new(key_of(client_secret), f"v1.{expires}.{state}".encode(),
                   hashlib.sha256).hexdigest()
    return f"v1.{expires}.{state}.{mac}"


def start(binary, tmp_path, gh, app, admin, name="a"):
    d = tmp_path / name
    d.mkdir()
    return Server(binary, d, free_port(), AUTOPATCH_ADMIN_LISTEN=f"127.0.0.1:{admin}",
                  AUTOPATCH_CONSOLE_SIGN_IN="always", GITHUB_URL=gh.url, GITHUB_API_URL=gh.url,
                  GITHUB_CLIENT_ID=app["client_id"],
                  GITHUB_CLIENT_SECRET=app["client_secret"]).start()


def begin(visitor):
    """GET /login: (the ap_login cookie's value, the state in GitHub's URL, the Set-Cookie)."""
    status, headers, _ = visitor.request("GET", "/login")
    assert status == 303, status
    set_cookie = next(v for k, v in headers if k.lower() == "set-cookie")
    cookie = set_cookie.split(";", 1)[0].split("=", 1)[1]
    where = dict(headers)["Location"]
    state = urllib.parse.parse_qs(urllib.parse.urlsplit(where).query)["state"][0]
    return cookie, state, set_cookie, where


def github_sends_back(where, login):
    """The stand-in's authorize page, "Sign in as LOGIN": the callback's path and query."""
    with urllib.request.urlopen(where) as r:
        page = r.read().decode()
    link = re.search(rf'id="as-{login}" href="([^"]+)"', page).group(1).replace("&amp;", "&")
    back = urllib.parse.urlsplit(link)
    return f"{back.path}?{back.query}"


def finish(visitor, path, cookie):
    status, headers, text = visitor.request(
        "GET", path, headers={"Cookie": f"ap_login={cookie}"} if cookie is not None else {})
    for k, v in headers:
        if k.lower() == "set-cookie" and v.startswith("ap_session="):
            visitor.sid = v.split(";", 1)[0].split("=", 1)[1]
    return status, text, headers


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def test_ten_thousand_anonymous_logins_do_not_evict_a_pending_sign_in(autopatch_bin, tmp_path):
    gh = GitHubStub(str(tmp_path / "github")).start()
    admin = free_port()
    app = register_app(gh, f"http://127.0.0.1:{admin}")
    gh.config(users={"alice": {}})
    s = start(autopatch_bin, tmp_path, gh, app, admin)
    try:
        alice = Visitor(s.admin)
        cookie, state, set_cookie, where = begin(alice)
        # Bound to this browser: HttpOnly, Lax, only sent back to /login..., short-lived; and
        # not Secure on this plain-HTTP console (it is when AUTOPATCH_CONSOLE_URL is https).
        attrs = [a.strip() for a in set_cookie.split(";")[1:]]
        assert {"Path=/login", "Max-Age=600", "HttpOnly", "SameSite=Lax"} <= set(attrs), attrs
        assert "Secure" not in attrs
        assert cookie.split(".")[2] == state

        rss0 = rss_kib(s.proc.pid)
        t0 = time.monotonic()
        conn = http.client.HTTPConnection("127.0.0.1", admin, timeout=30)
        states = set()
        for _ in range(10000):
            conn.request("GET", "/login")
            r = conn.getresponse()
            r.read()
            assert r.status == 303
            states.add(urllib.parse.parse_qs(
                urllib.parse.urlsplit(r.getheader("Location")).query)["state"][0])
            if r.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", admin, timeout=30)
        conn.close()
        took = time.monotonic() - t0
        grew = rss_kib(s.proc.pid) - rss0
        print(f"10000 anonymous GET /login in {took:.1f} s; server RSS grew {grew} KiB")
        assert len(states) == 10000 and state not in states
        # Nothing kept per anonymous client: the flood does not grow the server (the old
        # 256-slot store was ~30 KiB; allow allocator noise, not 10,000 entries).
        assert grew < 4096, grew

        status, text, headers = finish(alice, github_sends_back(where, "alice"), cookie)
        assert status == 303, text
        assert any(k.lower() == "set-cookie" and v.startswith("ap_login=;") and
                   "Max-Age=0" in v for k, v in headers)
        status, text = alice.get("/")
        assert status == 200 and "Signed in as <strong>alice</strong>" in text
    finally:
        s.stop()
        gh.stop()


def test_callback_refusals_say_what_went_wrong(autopatch_bin, tmp_path):
    gh = GitHubStub(str(tmp_path / "github")).start()
    admin = free_port()
    app = register_app(gh, f"http://127.0.0.1:{admin}")
    gh.config(users={"alice": {}, "mallory": {}})
    s = start(autopatch_bin, tmp_path, gh, app, admin)
    try:
        alice, mallory = Visitor(s.admin), Visitor(s.admin)
        cookie, state, _, where = begin(alice)
        back = github_sends_back(where, "alice")

        # Login CSRF: Mallory's own sign-in link, opened in Alice's browser.
        _, _, _, m_where = begin(mallory)
        status, text, headers = finish(alice, github_sends_back(m_where, "mallory"), cookie)
        assert status == 400 and "not the one this browser was given" in text
        # ... and the sign-in Alice has in progress is kept (a forged link cannot end it).
        assert not any(k.lower() == "set-cookie" for k, v in headers)
        assert alice.sid is None

        # No cookie: started elsewhere, or cookies are blocked.
        for none in (None, ""):
            status, text, _ = finish(alice, back, none)
            assert status == 400 and "holds no sign-in in progress" in text

        # Tampered: a later expiry, the state of the link, the MAC kept; or a flipped MAC.
        _, exp, st, mac = cookie.split(".")
        for forged in (f"v1.{int(exp) + 86400}.{st}.{mac}",
                       f"v1.{exp}.{st}.{mac[:-1]}{'0' if mac[-1] != '0' else '1'}",
                       cookie_for("another-client-secret", st, exp), state):
            status, text, _ = finish(alice, back, forged)
            assert status == 400 and "not signed by this server" in text, forged

        # Expired: signed with the right key, ten minutes and more ago.
        old = cookie_for(app["client_secret"], st, int(time.time()) - 1)
        status, text, _ = finish(alice, back, old)
        assert status == 400 and "The sign-in expired" in text
        assert "More than ten minutes passed" in text
        assert alice.sid is None

        # The real one still works (the code was not spent by the refusals).
        status, text, _ = finish(alice, back, cookie)
        assert status == 303, text
        assert alice.get("/")[0] == 200
    finally:
        s.stop()
        gh.stop()


def test_a_sign_in_started_on_one_replica_finishes_on_another(autopatch_bin, tmp_path):
    """Replicas behind one proxy share the App's client secret, so they share the cookie's
    key: the documented derivation, computed here, is what both accept."""
    gh = GitHubStub(str(tmp_path / "github")).start()
    admin_a, admin_b = free_port(), free_port()
    app = register_app(gh, f"http://127.0.0.1:{admin_b}")
    gh.config(users={"alice": {}})
    a = start(autopatch_bin, tmp_path, gh, app, admin_a, "a")
    b = start(autopatch_bin, tmp_path, gh, app, admin_b, "b")
    try:
        cookie, state, _, where = begin(Visitor(a.admin))
        _, exp, st, _ = cookie.split(".")
        assert cookie == cookie_for(app["client_secret"], st, exp)
        # GitHub sends the browser to the registered callback, here replica b.
        where = where.replace(f"127.0.0.1%3A{admin_a}", f"127.0.0.1%3A{admin_b}")
        alice = Visitor(b.admin)
        status, text, _ = finish(alice, github_sends_back(where, "alice"), cookie)
        assert status == 303, text
        assert alice.get("/")[0] == 200
    finally:
        a.stop()
        b.stop()
        gh.stop()

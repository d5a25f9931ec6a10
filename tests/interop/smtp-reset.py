"""Password reset by mail, received by a real SMTP server (aiosmtpd).

Starts aiosmtpd on a free port, then a Gatehouse of its own (GATEHOUSE_BIN, a fresh SQLite
database in WORK_DIR) with GATEHOUSE_SMTP_URL pointing at it; asks for a reset link on
"Forgot your password?" for an existing and for an unknown email, reads the one mail that
arrives with Python's email parser, follows its link, sets a new password and signs in with it.
Exits non-zero, with a reason, on the first thing that is wrong.
"""

import email
import email.policy
import http.cookiejar
import os
import queue
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

from aiosmtpd.controller import Controller

EMAIL = "alice@example.com"
PASSWORD = "correct-horse-battery"
NEW_PASSWORD = "a-brand-new-password"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Inbox:
    def __init__(self):
        self.mails = queue.Queue()

    async def handle_DATA(self, server, session, envelope):
        self.mails.put((envelope.rcpt_tos, envelope.content))
        return "250 Message accepted for delivery"


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def browser():
    jar = http.cookiejar.CookieJar()
    return urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), NoRedirect())


def fetch(opener, url, form=None):
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    try:
        with opener.open(url, data=data, timeout=30) as r:
            return r.status, r.read().decode(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), e.headers


def hidden(html, name):
    m = re.search(r'name="%s" value="([^"]*)"' % re.escape(name), html)
    if not m:
        sys.exit(f"no hidden input {name} in the page")
    return m.group(1).replace("&#x2f;", "/").replace("&amp;", "&")


def ask(base, address):
    b = browser()
    status, html, _ = fetch(b, base + "/signin/forgot")
    assert status == 200, status
    csrf = hidden(html, "csrf_token")
    status, html, _ = fetch(b, base + "/signin/forgot", {"csrf_token": csrf, "email": address})
    return status, html.replace(csrf, "CSRF")


def sign_in(base, password):
    b = browser()
    _, html, _ = fetch(b, base + "/signin")
    csrf = hidden(html, "csrf_token")
    status, _, _ = fetch(
        b, base + "/signin", {"csrf_token": csrf, "next": "/", "email": EMAIL, "password": password}
    )
    return status


def main():
    inbox = Inbox()
    smtp = Controller(inbox, hostname="127.0.0.1", port=free_port())
    smtp.start()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    work = os.environ.get("WORK_DIR", ".")
    env = dict(
        os.environ,
        DATABASE_URL=f"sqlite://{work}/smtp-reset.db?mode=rwc",
        MCP_SERVER_URL=base + "/mcp",
        GATEHOUSE_BIND=f"127.0.0.1:{port}",
        GATEHOUSE_BOOTSTRAP_EMAIL=EMAIL,
        GATEHOUSE_BOOTSTRAP_PASSWORD=PASSWORD,
        GATEHOUSE_SMTP_URL=f"smtp://127.0.0.1:{smtp.port}",
        GATEHOUSE_SMTP_FROM="Gatehouse <gatehouse@example.com>",
    )
    log = open(os.path.join(work, "smtp-reset-server.log"), "w")
    server = subprocess.Popen([os.environ["GATEHOUSE_BIN"], "serve"], env=env, stdout=log, stderr=log)
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(base + "/healthz", timeout=2)
                break
            except Exception:
                time.sleep(0.1)
        else:
            sys.exit("the server did not start")
        unknown = ask(base, "nobody@example.com")
        known = ask(base, EMAIL)
        assert known[0] == 200 and unknown == known, "the page differs for an unknown email"
        print("forgot page: 200, the same for a known and an unknown email")
        rcpt, content = inbox.mails.get(timeout=60)
        assert rcpt == [EMAIL], rcpt
        msg = email.message_from_bytes(content, policy=email.policy.default)
        assert msg["From"] == "Gatehouse <gatehouse@example.com>", msg["From"]
        body = msg.get_body(preferencelist=("plain",)).get_content()
        links = re.findall(re.escape(base) + r"/reset\?token=\S+", body)
        assert len(links) == 1, body
        print(f"mail received by aiosmtpd for {rcpt[0]}: subject {msg['Subject']!r}")
        time.sleep(1)
        assert inbox.mails.empty(), "a mail went to the unknown email"
        b = browser()
        status, html, _ = fetch(b, links[0])
        assert status == 200, status
        status, _, headers = fetch(
            b,
            base + "/reset",
            {"csrf_token": hidden(html, "csrf_token"), "token": hidden(html, "token"), "password": NEW_PASSWORD},
        )
        assert status == 303 and headers["Location"] == "/signin?reset=1", (status, headers)
        assert sign_in(base, NEW_PASSWORD) == 303, "the new password does not sign in"
        assert sign_in(base, PASSWORD) == 401, "the old password still signs in"
        status, _, _ = fetch(browser(), links[0])
        assert status == 404, "the link worked twice"
        print("link followed: new password set, old refused, link spent")
    finally:
        server.terminate()
        server.wait(timeout=30)
        smtp.stop()


if __name__ == "__main__":
    main()

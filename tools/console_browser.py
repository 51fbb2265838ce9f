"""The console, used as a person uses it: headless Chromium (Debian's `chromium`, driven by Playwright) against a
real redis-server, `volley-mock`, `volley worker` and `volley api --console`. Run by tools/console-browser, which
installs Playwright and the accessibility checker into a venv first.

Each step is a check that can fail; the run stops at the first failure with what it saw. Screenshots of every page
go to the artefacts folder (CI keeps it), and every page is checked with axe-core: no serious or critical
violation.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect, sync_playwright

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, ".build", "debug")
ARTEFACTS = os.environ.get("VOLLEY_ARTEFACTS", os.path.join(ROOT, ".build", "artefacts", "console"))
CHROMIUM = os.environ.get("CHROMIUM", shutil.which("chromium") or "/usr/bin/chromium")
XSS = "<img src=x onerror=alert(1)>"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, check, timeout=30.0):
    """Polls `check` until it answers something truthy (a process starting up: no event to wait on)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise SystemExit(f"console-browser: timed out waiting for {what}")


class Stack:
    """redis-server, the mock, a worker and the API with the console, in a temporary folder."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="volley-console-")
        self.procs = []

    def start(self, name, args, **kw):
        log = open(os.path.join(self.dir, name + ".log"), "w")
        p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, **kw)
        self.procs.append((name, p))
        return p

    def up(self):
        sock = os.path.join(self.dir, "redis.sock")
        self.start("redis", ["redis-server", "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
                             "--save", "", "--appendonly", "no", "--dir", self.dir])
        wait_for("redis-server", lambda: os.path.exists(sock))
        mock_config = os.path.join(self.dir, "mock.json")
        with open(mock_config, "w") as f:
            json.dump({"apns": {"unregisteredPrefixes": ["dead"]}, "fcm": {"unregisteredPrefixes": ["dead"]}}, f)
        state = os.path.join(self.dir, "mock")
        self.start("mock", [os.path.join(BIN, "volley-mock"), "--port", "0", "--state-dir", state,
                            "--config", mock_config])
        endpoints = os.path.join(state, "endpoints.json")
        wait_for("volley-mock", lambda: os.path.exists(endpoints) and os.path.getsize(endpoints) > 0)
        e = json.load(open(endpoints))
        self.mock = e
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        secret = subprocess.check_output(["openssl", "rand", "-base64", "32"], text=True).strip()
        mock_url = f"https://{e['host']}:{e['port']}"
        self.config = os.path.join(self.dir, "volley.yaml")
        with open(self.config, "w") as f:
            f.write(f"""apps:
  - name: app1
    orgs: ["orgA", "orgB"]
    apns:
      keyFile: "{e['apns']['p8_file']}"
      keyId: "{e['apns']['key_id']}"
      teamId: "{e['apns']['team_id']}"
      topic: "{e['apns']['topic']}"
      environment: production
      host: "{e['host']}"
      port: {e['port']}
      caFile: "{e['ca_file']}"
    fcm:
      serviceAccountFile: "{e['fcm']['service_account_file']}"
      endpoint: "{mock_url}"
      caFile: "{e['ca_file']}"
      maxPerMinute: 1000000000
redis:
  url: "unix://{sock}"
log:
  level: warning
quotas:
  ios: 100000
  android: 100000
deliveries:
  days: 7
metrics:
  host: 127.0.0.1
  port: 0
  apiPort: 0
console:
  enabled: true
api:
  host: 127.0.0.1
  port: {self.port}
  drainSeconds: 0
  rateLimit: {{requestsPerSecond: 0, burst: 1}}
  userTokens:
    keys: [{{id: k1, secret: "{secret}"}}]
""")
        self.keys = {}
        for name, org, role in [("send", "orgA", "send"), ("read", "orgA", "read"), ("other", "orgB", "admin")]:
            out = subprocess.check_output([os.path.join(BIN, "volley"), "keys", "create", "--config", self.config,
                                           "--org", org, "--role", role, "--json"], text=True)
            self.keys[name] = json.loads(out)["key"]
        self.start("api", [os.path.join(BIN, "volley"), "api", "--config", self.config])
        wait_for("volley api", lambda: self.ok("/livez"))
        self.start("worker", [os.path.join(BIN, "volley"), "worker", "--config", self.config])

    def ok(self, path):
        try:
            with urllib.request.urlopen(self.base + path, timeout=1) as r:
                return r.status == 200
        except (urllib.error.URLError, ConnectionError, OSError):
            return False

    def api(self, method, path, key, body=None, token=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + (token or self.keys[key]))
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                text = r.read()
                return r.status, json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def register(self, org_key, user, platform, token):
        status, answer = self.api("POST", "/v1/user-tokens", org_key, {"userId": user, "appName": "app1"})
        assert status == 201, (status, answer)
        status, answer = self.api("PUT", "/v1/devices", None, {"platform": platform, "token": token},
                                  token=answer["token"])
        assert status == 200, (status, answer)

    def mock_stats(self):
        url = f"https://{self.mock['host']}:{self.mock['port']}/_mock/stats"
        out = subprocess.check_output(["curl", "-sf", "--http2", "--cacert", self.mock["ca_file"], url], text=True)
        return json.loads(out)

    def down(self):
        for _, p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for name, p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        if os.environ.get("VOLLEY_KEEP") is None:
            shutil.rmtree(self.dir, ignore_errors=True)


def ios_token(prefix, n):
    return prefix + format(n, "x").rjust(64 - len(prefix), "0")


def search_token(i):
    """The test-push search's devices: tails no campaign device's token has."""
    return ios_token("a5", 0xA5A500 + i)


class Run:
    def __init__(self, stack, browser):
        self.stack = stack
        self.browser = browser
        self.axe = Axe()
        self.shots = 0
        os.makedirs(ARTEFACTS, exist_ok=True)

    def session(self, key):
        context = self.browser.new_context(base_url=self.stack.base)
        page = context.new_page()
        page.on("dialog", lambda d: d.accept())
        dialogs = []
        page.on("dialog", lambda d: dialogs.append(d.message))
        page.goto("/console/login")
        page.fill("#key", self.stack.keys[key])
        page.click("button[type=submit]")
        expect(page).to_have_url(re.compile(r"/console/jobs$"))
        return page, dialogs

    def check_page(self, page, name):
        """A screenshot for the artefacts, and no serious accessibility violation."""
        self.shots += 1
        page.screenshot(path=os.path.join(ARTEFACTS, f"{self.shots:02d}-{name}.png"), full_page=True)
        results = self.axe.run(page)
        bad = [v for v in results.response["violations"] if v.get("impact") in ("serious", "critical")]
        if bad:
            raise AssertionError(f"{name}: accessibility: " + "; ".join(
                f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}" for v in bad))

    def counts_on(self, page):
        return {cell.get_attribute("data-count"): int(cell.inner_text()) for cell in page.locator("[data-count]").all()}


def value_at(job, path):
    v = job
    for k in path.split("."):
        v = v.get(k) if isinstance(v, dict) else None
    return v or 0


def main():
    stack = Stack()
    try:
        stack.up()
        # Devices: 200 campaign devices, a dead token, then 7 users of orgA registered one after another (the search
        # lists the five newest), and orgB's device registered last (newest of all, never shown to orgA).
        campaign = os.path.join(stack.dir, "campaign.jsonl")
        with open(campaign, "w") as f:
            for i in range(200):
                f.write(json.dumps({"org": "orgA", "app": "app1", "user": f"c{i}", "platform": "ios",
                                    "token": ios_token("c0", i)}) + "\n")
        subprocess.check_call([os.path.join(BIN, "volley"), "devices", "import", "--config", stack.config, campaign],
                              stdout=subprocess.DEVNULL)
        stack.register("send", "udead", "ios", ios_token("dead", 1))
        for i in range(7):
            stack.register("send", f"search{i}", "ios", search_token(i))
        stack.register("other", "borg", "ios", ios_token("b0b0", 0xB0B0B1))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                        args=["--no-sandbox", "--disable-dev-shm-usage"])
            run = Run(stack, browser)
            steps(run, stack)
            browser.close()
        print(f"console-browser: every check passed; {run.shots} screenshots in {ARTEFACTS}")
    except BaseException:
        for name, _ in stack.procs:
            path = os.path.join(stack.dir, name + ".log")
            if os.path.exists(path):
                tail = open(path).read()[-2000:]
                if tail.strip():
                    print(f"--- {name}.log ---\n{tail}", file=sys.stderr)
        raise
    finally:
        stack.down()


def steps(run, stack):
    page, dialogs = run.session("send")
    run.check_page(page, "campaigns-empty")

    # Send test notification: the search lists the app's five newest devices of this org, none of orgB's.
    page.goto("/console/test-push?app=app1")
    picks = page.locator("input[name=pick]")
    expect(picks).to_have_count(5)
    listed = page.locator("fieldset").first.inner_text()
    for i in range(2, 7):
        assert search_token(i)[-8:] in listed, listed
    assert ios_token("b0b0", 0xB0B0B1)[-8:] not in listed, listed
    assert search_token(6) not in page.content(), "a whole token in the page"
    run.check_page(page, "test-push")
    # A user's devices.
    page.fill("#search", "search3")
    page.click("form.filters button")
    expect(page.locator("input[name=pick]")).to_have_count(1)

    # A good token: 200, an apns-id, the hour's quota up by exactly one.
    _, before = stack.api("GET", "/v1/quota", "send")
    page.goto("/console/test-push?app=app1")
    page.fill("#recipient", ios_token("600d", 1))
    page.fill("#alert", "Hello from the console")
    page.fill("#badge", "1")
    page.click("#send")
    expect(page.locator("#result-status")).to_have_text("200")
    assert page.locator("#result-apns-id").inner_text().strip(), "no apns-id shown"
    _, after = stack.api("GET", "/v1/quota", "send")
    assert after["platforms"]["ios"]["used"] - before["platforms"]["ios"]["used"] == 1, (before, after)
    run.check_page(page, "test-push-accepted")

    # A token the mock rejects: the reason shown, the device gone from Devices.
    page.goto("/console/test-push?app=app1&search=udead")
    page.check("input[name=pick]")
    page.fill("#alert", "Are you there?")
    page.click("#send")
    expect(page.locator("#result-reason")).to_have_text("Unregistered")
    expect(page.locator("#result-removed")).to_be_visible()
    page.goto("/console/devices?user=udead&app=app1")
    expect(page.locator("#no-devices")).to_be_visible()
    page.goto("/console/devices?user=search1&app=app1")
    expect(page.locator("table.devices tbody tr")).to_have_count(1)
    run.check_page(page, "devices")
    # By the token's last characters, within the org: orgA's device, never orgB's.
    page.goto("/console/devices?app=app1&suffix=" + search_token(3)[-8:])
    expect(page.locator("table.matches tbody tr")).to_have_count(1)
    expect(page.locator("table.matches")).to_contain_text("search3")
    page.goto("/console/devices?app=app1&suffix=" + ios_token("b0b0", 0xB0B0B1)[-8:])
    expect(page.locator("#no-matches")).to_be_visible()

    # An FCM dry run: the mock sees validate_only.
    before = stack.mock_stats().get("fcm_validate_only", 0)
    page.goto("/console/test-push?app=app1")
    page.select_option("#platform", "android")
    page.fill("#recipient", "fcm-console-" + "x" * 40)
    page.fill("#payload", '{"recordId": "42"}')
    page.check("#dryRun")
    page.click("#send")
    expect(page.locator("#result-outcome")).to_have_text("accepted")
    assert stack.mock_stats().get("fcm_validate_only", 0) == before + 1, "the mock saw no validate_only message"

    # The guide's messages.
    page.goto("/console/test-push?app=app1")
    page.fill("#recipient", ios_token("600d", 2))
    page.fill("#badge", "many")
    page.click("#send")
    expect(page.locator("#test-error")).to_have_text("Badge must be a number")

    # A title that is markup shows as text.
    page.goto("/console/jobs/new")
    page.fill("#jobTitle", XSS)
    page.click("#send")
    expect(page.locator("p.error")).to_contain_text("choose an audience")
    assert page.input_value("#jobTitle") == XSS
    assert page.locator("img[src=x]").count() == 0 and not dialogs, "markup ran"
    run.check_page(page, "new-campaign-error")

    # A preview renders the names for the chosen user and sends nothing.
    page.goto("/console/jobs/new")
    page.fill("#jobTitle", "Hi {{ first_name | 'Friend' }}")
    page.fill("#previewUser", "c1")
    page.click("#preview")
    expect(page.locator("#preview-title")).to_have_text("Hi Friend")
    run.check_page(page, "new-campaign-preview")

    # A throttled campaign from the New campaign page: watched, paused, resumed, cancelled.
    page.goto("/console/jobs/new")
    page.fill("#users", " ".join(f"c{i}" for i in range(200)))
    page.fill("#jobTitle", "Throttled from the console")
    page.fill("#body", "one of 200")
    page.fill("#throttle", "600")
    page.fill("#jobId", "console-throttled")
    page.click("#send")
    expect(page).to_have_url(re.compile(r"/console/jobs/console-throttled$"))
    run.check_page(page, "campaign-running")
    # The page's own live refresh brings the first accepted pushes in.
    expect(page.locator('[data-count="counts.accepted"]')).not_to_have_text("0", timeout=30000)
    page.click("#pause")
    expect(page.locator("[data-field=state]")).to_have_text("paused", timeout=15000)
    # Paused: the counts settle; the page then equals the API's answer.
    settle(run, page, stack, "console-throttled")
    paused_at = run.counts_on(page)["counts.accepted"]
    page.click("#resume")
    wait_for("sends after the resume", lambda: live_accepted(stack, "console-throttled") > paused_at, timeout=30)
    page.reload()
    page.click("#cancel")
    expect(page.locator("[data-field=state]")).to_have_text(re.compile("cancelled|done"), timeout=15000)
    expect(page.locator("span.state.cancelled").first).to_be_visible(timeout=15000)
    final = settle(run, page, stack, "console-throttled")
    assert final < 200, f"the cancel did not stop the campaign ({final} of 200 accepted)"
    run.check_page(page, "campaign-cancelled")

    # A campaign watched to its report: every refresh shows what the API answered for it.
    page.goto("/console/jobs/new")
    page.fill("#users", " ".join(f"c{i}" for i in range(50)))
    page.fill("#jobTitle", "Watched to the end")
    page.fill("#jobId", "console-watched")
    page.click("#send")
    expect(page).to_have_url(re.compile(r"/console/jobs/console-watched$"))
    expect(page.locator("[data-field=state]")).to_have_text("done", timeout=30000)
    final = settle(run, page, stack, "console-watched")
    assert final == 50, final
    run.check_page(page, "campaign-done")
    page.goto("/console/jobs")
    expect(page.locator("tr[data-job=console-watched]")).to_be_visible()
    run.check_page(page, "campaigns")
    page.goto("/console/health")
    run.check_page(page, "health")
    page.goto("/console/library")
    run.check_page(page, "library")

    # A POST without its CSRF token is refused (the session cookie alone is not enough).
    refused = page.request.post(stack.base + "/console/jobs/console-watched/cancel", form={})
    assert refused.status == 403, refused.status

    # A read key sees the campaign and cannot cancel it.
    reader, _ = run.session("read")
    reader.goto("/console/jobs/console-throttled")
    expect(reader.locator("#cancel")).to_have_count(0)
    csrf = reader.locator("input[name=csrf]").first.get_attribute("value")
    answer = reader.request.post(stack.base + "/console/jobs/console-throttled/cancel", form={"csrf": csrf})
    assert answer.status == 403, answer.status
    run.check_page(reader, "read-key")

    # Another org's key sees none of orgA's campaigns.
    other, _ = run.session("other")
    other.goto("/console/jobs")
    assert "console-watched" not in other.content()
    assert other.goto("/console/jobs/console-watched").status == 404


def live_accepted(stack, job):
    _, answer = stack.api("GET", f"/v1/jobs/{job}", "send")
    return value_at(answer, "counts.accepted") if isinstance(answer, dict) else 0


def settle(run, page, stack, job):
    """Reloads the page until it shows what `GET /v1/jobs/{id}` answers, count by count (a paused, cancelled or
    finished job's counts stop moving); answers the accepted count."""
    def same():
        page.reload()
        shown = run.counts_on(page)
        _, api = stack.api("GET", f"/v1/jobs/{job}", "send")
        return shown if all(v == value_at(api, k) for k, v in shown.items()) else None
    shown = wait_for(f"{job}'s page to show the API's counts", same, timeout=30)
    return shown["counts.accepted"]


if __name__ == "__main__":
    main()

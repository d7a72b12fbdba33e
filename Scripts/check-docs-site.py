#!/usr/bin/env python3
"""Opens the built API reference (Scripts/build-docs.sh) in headless Chromium, as a reader would,
and checks that it renders: the package's landing page lists the modules, every module's page, a
symbol page with its declaration and documentation, and the three state diagrams' articles, whose
images load. A screenshot of each page is kept in .build/docs/screenshots.

    Scripts/check-docs-site.py

Needs Debian's chromium. Serves the site on 127.0.0.1 only, on a free port, and stops the server
(and any browser left) before it exits.
"""
import functools
import html
import http.server
import os
import re
import shutil
import socketserver
import subprocess
import sys
import threading
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SITE = os.path.join(ROOT, ".build/docs/site")
SHOTS = os.path.join(ROOT, ".build/docs/screenshots")

# (path, the title the page's script sets once it rendered, texts its rendered content must hold)
PAGES = [
    ("documentation", "Tether", ["TetherXMPPClient", "TetherSignalRClient", "TetherCore"]),
    ("documentation/tetherxmppclient", "TetherXMPPClient",
     ["An XMPP client that stays connected", "Getting started with XMPP"]),
    ("documentation/tetherxmppclient/xmppclient", "XMPPClient",
     ["final class XMPPClient", "func connect()", "Instance Methods"]),
    ("documentation/tetherxmpp/xmppclientmachinestates", "The XMPP client machine",
     ["drawn from the transition table"]),
    ("documentation/tethersignalr/hubconnectionmachinestates", "The hub connection machine",
     ["drawn from the transition table"]),
    ("documentation/tetherhttp/httptransportstates", "The HTTP transports",
     ["drawn from the transition table"]),
]
# Every module's page renders too (its title is the module's name).
MODULES = ["TetherXMPPClient", "TetherSignalRClient", "TetherXMPP", "TetherSignalR", "TetherDispatch", "TetherCore",
           "TetherXML", "TetherJSON", "TetherMessagePack", "TetherText", "TetherDNS", "TetherHTTP", "TetherTLS"]
PAGES += [(f"documentation/{module.lower()}", module, [module, "Overview"])
          for module in MODULES if module != "TetherXMPPClient"]
DIAGRAMS = {
    "documentation/tetherxmpp/xmppclientmachinestates": "xmpp-client-states.svg",
    "documentation/tethersignalr/hubconnectionmachinestates": "signalr-hub-connection-states.svg",
    "documentation/tetherhttp/httptransportstates": "http-transport-states.svg",
}


def browser():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return name
    sys.exit("check-docs-site: no Chromium (apt-get install chromium); the reference was not checked")


def rendered(command, url, screenshot):
    base = [command, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--virtual-time-budget=10000", "--window-size=1400,1000"]
    dom = subprocess.run(base + ["--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    subprocess.run(base + [f"--screenshot={screenshot}", url], capture_output=True, timeout=120)
    return dom


def visible_text(dom):
    dom = re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom)))


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *arguments):
        pass


def main():
    if not os.path.isdir(SITE):
        sys.exit("check-docs-site: no site at .build/docs/site (run Scripts/build-docs.sh)")
    command = browser()
    os.makedirs(SHOTS, exist_ok=True)
    handler = functools.partial(QuietHandler, directory=SITE)
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    failures = []
    try:
        for path, title, texts in PAGES:
            shot = os.path.join(SHOTS, path.replace("/", "_") + ".png")
            dom = rendered(command, base + path, shot)
            found = re.search(r"<title>(.*?)</title>", dom, re.S)
            shown = html.unescape(found.group(1)) if found else ""
            if not shown.startswith(title):
                failures.append(f"{path}: the page did not render (title '{shown}', expected '{title} …')")
                continue
            text = visible_text(dom)
            for expected in texts:
                if expected not in text:
                    failures.append(f"{path}: '{expected}' is not on the rendered page")
            if not os.path.exists(shot) or os.path.getsize(shot) < 10_000:
                failures.append(f"{path}: no screenshot (or a blank one)")
            diagram = DIAGRAMS.get(path)
            if diagram:
                source = re.search(r'<img[^>]+src="([^"]*' + re.escape(diagram) + r')"', dom)
                if not source:
                    failures.append(f"{path}: the page shows no image {diagram}")
                    continue
                with urllib.request.urlopen(base + source.group(1).lstrip("/"), timeout=30) as response:
                    body = response.read()
                if response.status != 200 or b"<svg" not in body[:2000] or body.count(b"<g id=\"node") < 5:
                    failures.append(f"{path}: {diagram} did not load as a diagram")
    finally:
        server.shutdown()
        server.server_close()
    if failures:
        print("\n".join(failures), file=sys.stderr)
        sys.exit(f"check-docs-site: {len(failures)} problems (screenshots in .build/docs/screenshots)")
    print(f"check-docs-site: {len(PAGES)} pages rendered in {command}, {len(DIAGRAMS)} diagrams loaded "
          f"(screenshots in .build/docs/screenshots)", file=sys.stderr)


if __name__ == "__main__":
    main()

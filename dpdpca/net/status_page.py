"""The proxy's read-only status page at ``/``: plain HTML, no script, no external asset, refreshing itself.

It shows what :meth:`dpdpca.net.collection.Collection.session` returns (the
same facts as ``dpdpca proxy status``): the owners expected, accepted and
still missing, the quorum and deadline, the release's state and the privacy
budget spent.  Every value is HTML-escaped.

Examples
--------
>>> html = render_status_page({"session": "s1", "phase": "collecting", "quorum": 2, "min_shares": 1,
...     "deadline_unix": 0.0, "seconds_left": 30.0, "owners_expected": ["a", "b"], "owners_accepted": ["a"],
...     "owners_missing": ["b"], "closed_because": None,
...     "release": {"state": "not yet", "mode": "add-remove", "when": "when the collection closes"},
...     "budget": {"epsilon": 1.0, "delta": 1e-05, "epsilon_spent": 0.0, "delta_spent": 0.0}})
>>> '<meta http-equiv="refresh" content="5">' in html, "1 of 2 owners" in html
(True, True)
"""

from __future__ import annotations

import datetime as _dt
from html import escape
from typing import Any

__all__ = ["REFRESH_SECONDS", "render_status_page"]

#: How often the page reloads itself.
REFRESH_SECONDS = 5

_STYLE = """
body { font-family: sans-serif; margin: 2em; color: #111; background: #fff; }
h1 { font-size: 1.4em; } table { border-collapse: collapse; margin: 1em 0; }
td, th { border: 1px solid #999; padding: 0.3em 0.8em; text-align: left; }
.accepted { background: #c8f0c8; } .missing { background: #f6e0a8; }
.phase { font-size: 1.2em; font-weight: bold; padding: 0.3em 0.6em; background: #dde8ff; }
"""


def _service(service: dict[str, Any] | None) -> str:
    if not service:
        return ""
    return (f" The service's budget over every session: epsilon {float(service['epsilon_spent']):.4g} of "
            f"{escape(str(service['epsilon']))}, delta {float(service['delta_spent']):.3g} of "
            f"{escape(str(service['delta']))}.")


def render_status_page(s: dict[str, Any]) -> str:
    """The page for one session summary (``Collection.session()``)."""
    deadline = _dt.datetime.fromtimestamp(float(s["deadline_unix"]), _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    left = f" ({float(s['seconds_left']):.0f} s left)" if s["phase"] == "collecting" else ""
    accepted, missing = list(s["owners_accepted"]), list(s["owners_missing"])
    rows = "".join(f'<tr class="accepted"><td>{escape(o)}</td><td>share accepted</td></tr>' for o in accepted)
    rows += "".join(f'<tr class="missing"><td>{escape(o)}</td><td>still expected</td></tr>' for o in missing)
    release, budget = s["release"], s["budget"]
    closed = f" (closed: {escape(str(s['closed_because']))})" if s.get("closed_because") else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{REFRESH_SECONDS}">
<title>dpdpca proxy: {escape(s['phase'])}</title>
<style>{_STYLE}</style></head>
<body>
<h1>dpdpca proxy, session {escape(str(s['session']))}</h1>
<p><span class="phase">{escape(s['phase'])}</span>{closed}</p>
<p>{len(accepted)} of {len(s['owners_expected'])} owners have sent their share; the collection closes at
{int(s['quorum'])} shares (quorum) or at the deadline, {escape(deadline)} UTC{escape(left)}, with at least
{int(s['min_shares'])}.</p>
<table><tr><th>owner</th><th>share</th></tr>{rows}</table>
<p>Release: <b>{escape(release['state'])}</b> ({escape(release['mode'])} release, made
{escape(release['when'])}).</p>
<p>Privacy budget of this session's one release: epsilon {float(budget['epsilon']):g}, delta
{float(budget['delta']):g}; spent so far: epsilon {float(budget['epsilon_spent']):g}, delta
{float(budget['delta_spent']):g}.{_service(budget.get('service'))}</p>
<p><small>Read-only; this page reloads itself every {REFRESH_SECONDS} s. The same facts:
<code>dpdpca proxy status</code> or <code>/v1/session</code>.</small></p>
</body></html>
"""

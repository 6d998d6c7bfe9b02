"""The client of a query's control endpoint, as ``streamfold control OUTPUT ACTION`` uses it.

It reads the URL and token from ``OUTPUT/_control.json`` and speaks the JSON API of
:mod:`.server`; an error answer becomes a :class:`~streamfold.errors.ControlError` with the
endpoint's code, so the command line shows it as it shows any coded error.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from ..errors import ControlError

CONTROL_FILE = "_control.json"  # in OUTPUT: the endpoint's URL and token, while the query runs


class ControlClient:
    def __init__(self, output: str, timeout: float = 3600.0) -> None:
        path = os.path.join(output, CONTROL_FILE)
        try:
            with open(path, encoding="utf-8") as fh:
                info = json.load(fh)
        except FileNotFoundError:
            raise ControlError(f"no query is running with output {output} ({path} does not exist)",
                               code="NOT_RUNNING", params={"output": output},
                               hint="start it with streamfold run … --output DIR; the file is there while it runs",
                               status=404) from None
        except (OSError, ValueError) as e:
            raise ControlError(f"cannot read {path}: {e}", code="NOT_RUNNING", params={"output": output}) from None
        self.url, self.token, self.timeout = info["url"], info["token"], timeout

    def call(self, method: str, path: str, body: dict[str, Any] | None = None,
             query: dict[str, Any] | None = None) -> Any:
        url = self.url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as e:
            try:
                err = json.loads(e.read())["error"]
            except (ValueError, KeyError, TypeError):
                err = {"code": "HTTP_ERROR", "message": f"HTTP {e.code} from {url}"}
            raise ControlError(err.get("message", ""), code=err.get("code"), hint=err.get("hint"),
                               params=err.get("params"), status=e.code) from None
        except urllib.error.URLError as e:
            raise ControlError(f"no query answers at {self.url}: {e.reason}", code="NOT_RUNNING",
                               params={"url": self.url},
                               hint="the query may have stopped or been killed; its _control.json is left over",
                               status=503) from None

    # -- the actions -----------------------------------------------------------------------------
    def status(self) -> Any:
        return self.call("GET", "/v1/status")

    def pause(self, wait: bool = True, timeout: float = 30.0) -> Any:
        return self.call("POST", "/v1/pause", {"wait": wait, "timeout": timeout})

    def resume(self) -> Any:
        return self.call("POST", "/v1/resume")

    def skip(self) -> Any:
        return self.call("POST", "/v1/skip")

    def breakpoints(self) -> Any:
        return self.call("GET", "/v1/breakpoints")

    def add_breakpoint(self, kind: str, target: str | None = None, condition: str | None = None,
                       after: int | None = None) -> Any:
        return self.call("POST", "/v1/breakpoints", {"kind": kind, "target": target, "condition": condition,
                                                     "after": after})

    def remove_breakpoint(self, bp_id: str) -> Any:
        return self.call("DELETE", f"/v1/breakpoints/{urllib.parse.quote(bp_id)}")

    def inspect(self, sql: str, limit: int = 100) -> Any:
        return self.call("POST", "/v1/inspect", {"sql": sql, "limit": limit})

    def reconfigure(self, sql: str, semantics: str = "restate", wait: bool = False, timeout: float = 600.0) -> Any:
        return self.call("POST", "/v1/reconfigure", {"sql": sql, "semantics": semantics, "wait": wait,
                                                     "timeout": timeout})

    def history(self) -> Any:
        return self.call("GET", "/v1/history")

    def events(self, after: int = 0, timeout: float = 0.0) -> Any:
        return self.call("GET", "/v1/events", query={"after": after, "timeout": timeout})

"""The operator console: see and steer a scheduler's timers in a browser (``flowsched[console]``).

``flowsched console --uri URI`` serves it; :func:`app` returns the same ASGI application to
mount in your own service. Module map:

* ``application``: :func:`app`, the Starlette routes, error pages, security headers;
* ``pages``: one method per page or action, rendering the Jinja templates (``templates/``);
* ``queries``: query strings to indexed finds and aggregation pipelines (pure, no driver);
* ``driver``: one async face over a collection (``pymongo.AsyncMongoClient``, or a sync one);
* ``source``: what is read and done on MongoDB, or on a running in-memory scheduler;
* ``security``: the operator token, sign-in cookie and CSRF token;
* ``views``: rows and chart bars for the templates.

Importing :mod:`flowsched` does not import this package (nor Starlette, Jinja2 or uvicorn).
"""

from __future__ import annotations

from flowsched.console.application import app

__all__ = ["app"]

"""The operator console: see and steer a scheduler's timers in a browser (``flowsched[console]``).

``flowsched console --uri URI`` serves it; :func:`app` returns the same ASGI application to
mount in your own service. Module map:

* ``application``: :func:`app`, its options;
* ``routing``: the routes, error pages, and the layer around every response (allowed hosts,
  security headers, ``no-store``, the last-resort 500, the access log);
* ``pages``: one method per read page; ``actions``: sign-in, sign-out, the actions on one
  timer; ``bulk_pages`` and ``bulk``: the bulk actions (Jinja templates in ``templates/``);
* ``identity``: users files, secret hashes, trusted proxies; ``sessions``: sign-ins kept on
  the server and the sign-in throttle; ``security``: who may look and act, CSRF;
* ``audit``: every sign-in, refusal and action, in ``<collection>_audit`` or in memory;
* ``queries`` and ``pipelines``: query strings to indexed finds and aggregation pipelines
  (pure, no driver);
* ``driver``: one async face over a collection (``pymongo.AsyncMongoClient``, or a sync one);
* ``source`` and ``memory_source``: what is read and done on MongoDB, or on a running
  in-memory scheduler;
* ``views``: rows, chart bars and durations for the templates.

Importing :mod:`flowsched` does not import this package (nor Starlette, Jinja2 or uvicorn).
"""

from __future__ import annotations

from flowsched.console.application import app

__all__ = ["app"]

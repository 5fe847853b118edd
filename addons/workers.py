"""streamfix: one worker of several (``streamfix sidecar --workers N``, streamfix/workers.py).

Options the launcher sets on each worker, usable by hand too (several sidecars on one or
more machines sharing one Redis):

* ``streamfix_redis=redis://HOST:PORT/DB``: the upstream leg's correlation in that Redis
  (addons/sharedstate.py), so that a client turn served here is matched with its upstream
  call whichever worker (or machine) read it. Empty (the default): this process's memory,
  as a single sidecar has it. Unreachable at startup or later: one line, and the
  client-leg rules decide the verdicts until it answers (never a wait past
  ``streamfix_redis_timeout_ms``).
* ``streamfix_worker=NAME``: this worker's name; turn-log lines and the log's upstream
  records carry it.

Nothing here runs per flow or per event: the correlator's calls are where they were.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from mitmproxy import ctx, exceptions

from . import shared

if TYPE_CHECKING:
    from .sharedstate import RedisStore

logger = logging.getLogger("streamfix.workers")


class Workers:
    """See the module docstring."""

    def __init__(self) -> None:
        self.store: RedisStore | None = None

    def load(self, loader) -> None:
        loader.add_option(
            "streamfix_redis",
            str,
            "",
            """redis://HOST:PORT/DB: keep the upstream leg's correlation (client requests
            waiting for their upstream call, the upstream calls' results) in this Redis, shared
            by every worker and sidecar pointed at it (streamfix sidecar --workers N). Empty:
            in this process.""",
        )
        loader.add_option(
            "streamfix_redis_timeout_ms",
            int,
            100,
            """The most one Redis call may wait; one that does not answer in time turns
            Redis off for a second (the client-leg rules decide meanwhile).""",
        )
        loader.add_option("streamfix_worker", str, "", "This worker's name (set by streamfix sidecar --workers N).")

    def configure(self, updated: set[str]) -> None:
        opts = ctx.options
        if "streamfix_redis_timeout_ms" in updated and opts.streamfix_redis_timeout_ms <= 0:
            raise exceptions.OptionsError(
                f"streamfix_redis_timeout_ms must be > 0, not {opts.streamfix_redis_timeout_ms}"
            )
        if "streamfix_worker" in updated:
            shared.worker = opts.streamfix_worker
        if not updated & {"streamfix_redis", "streamfix_redis_timeout_ms", "streamfix_worker"}:
            return
        url = opts.streamfix_redis
        if not url:
            if self.store is not None:
                shared.reset()
                self.store = None
            return
        if not url.startswith(("redis://", "rediss://", "unix://")):
            raise exceptions.OptionsError(f"streamfix_redis takes redis://HOST:PORT/DB, not {url!r}")
        try:
            from .sharedstate import RedisStore, SharedCorrelator

            store = RedisStore(url, opts.streamfix_redis_timeout_ms / 1000)
        except ImportError as e:
            raise exceptions.OptionsError(f"streamfix_redis needs the redis package ({e}): pip install redis") from e
        except ValueError as e:
            raise exceptions.OptionsError(f"streamfix_redis: {e}") from e
        self.store = store
        shared.use(SharedCorrelator(store, opts.streamfix_worker))
        why = store.ping()
        name = f" (worker {opts.streamfix_worker})" if opts.streamfix_worker else ""
        if why is None:
            left = store.forget_worker(opts.streamfix_worker) if opts.streamfix_worker else 0
            logger.info(
                f"streamfix: the upstream leg's correlation is shared through Redis at {store.where()}{name}"
                + (f"; {left} pending request(s) of this worker's previous process dropped" if left else "")
            )
        else:
            store.mark_down()  # its first calls return at once; "answers again" is said when it does
            logger.warning(
                f"streamfix: Redis at {store.where()} does not answer ({why}){name}: starting anyway; the "
                "client-leg rules decide the verdicts until it answers"
            )

    def done(self) -> None:
        if self.store is not None:
            try:
                self.store.client.close()
            except Exception as e:  # noqa: BLE001 - shutting down: nothing to do about it but say it
                logger.debug(f"streamfix: closing the Redis client: {type(e).__name__}: {e}")


addons = [Workers()]

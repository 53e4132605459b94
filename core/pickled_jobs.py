"""Jobs an older version queued as pickles, rewritten as JSON jobs when a worker starts.

Before core.queues.SERIALIZER, RQ pickled every job, and the new workers fail a pickle; so an upgrade
needed the queues drained first. A job's pickle is read here by an unpickler that loads no class or
function at all: the jobs' arguments were plain data (bot.intake.events' `job_kwargs`), and a pickle that names
anything else (`os.system`) is refused unrun. A job the contract cannot run (an unknown name, missing
arguments) is moved to the failed registry, saying which delivery to ask GitHub again for.
"""

from __future__ import annotations

import io
import json
import logging
import pickle
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from redis import Redis
from rq.job import Job
from rq.registry import FailedJobRegistry, ScheduledJobRegistry

from core.queues import JOB_TEXT_KEY, JOB_TEXT_TTL, JOBS, KEEP_SECONDS, SERIALIZER, make_queue, split_text

log = logging.getLogger(__name__)
SPECS = {spec.name: spec for spec in JOBS}


class _PlainUnpickler(pickle.Unpickler):
    """Lists, dicts, strings, numbers, None: what a job's arguments were. No global is ever loaded."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"names {module}.{name}; a queued job holds plain data only")


def is_pickle(raw: bytes | None) -> bool:
    """Whether a job's field is a pickle (protocol 2 and later start so; JSON never does)."""
    return bool(raw) and raw[:1] == b"\x80"


@dataclass
class Upgrade:
    """What one start found: the jobs rewritten as JSON and those refused (job id → why)."""

    converted: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)


def convert_pickled_jobs(redis: Redis, queue_names: Iterable[str]) -> Upgrade:
    """Rewrite every queued or scheduled pickled job of these queues as a JSON job; refuse what cannot run."""
    upgrade = Upgrade()
    for name in queue_names:
        queue = make_queue(redis, name)
        scheduled = ScheduledJobRegistry(name, connection=redis, serializer=SERIALIZER)
        for job_id in dict.fromkeys(queue.get_job_ids() + scheduled.get_job_ids()):
            why = _convert(redis, job_id)
            if why == "":
                upgrade.converted.append(job_id)
            elif why is not None:
                upgrade.refused[job_id] = why
                _fail(redis, name, job_id, why)
    if upgrade.converted or upgrade.refused:
        log.warning("jobs queued as pickles by an older version: %d rewritten as JSON, %d refused",
                    len(upgrade.converted), len(upgrade.refused))
    return upgrade


def _convert(redis: Redis, job_id: str) -> str | None:
    """None: not a pickle; "": rewritten; else why it cannot run."""
    key = Job.key_for(job_id)
    raw, raw_meta = redis.hmget(key, "data", "meta")
    try:
        data = zlib.decompress(raw) if raw else raw
    except zlib.error:  # RQ reads an uncompressed field as it is, too
        data = raw
    if not is_pickle(data):
        return None
    try:
        func_name, instance, args, kwargs = _PlainUnpickler(io.BytesIO(data)).load()
        meta = _PlainUnpickler(io.BytesIO(raw_meta)).load() if is_pickle(raw_meta) else None
    except (pickle.UnpicklingError, ValueError, TypeError, EOFError, AttributeError) as error:
        return f"its pickle cannot be read as plain data ({error})"
    spec = SPECS.get(func_name) if isinstance(func_name, str) else None
    if spec is None or instance is not None or args or not isinstance(kwargs, dict):
        return f"{func_name!r} with positional arguments or an instance is not a job of core.queues.JOBS"
    if missing := spec.arguments - kwargs.keys():
        return f"{spec.name} needs {', '.join(sorted(missing))}, which the old job lacks"
    kwargs, text = split_text(spec, kwargs)  # the issue text travels beside the job now, never in it
    fields = {"data": zlib.compress(SERIALIZER.dumps((func_name, None, [], kwargs)))}
    if meta is not None:
        fields["meta"] = SERIALIZER.dumps(meta)
    with redis.pipeline() as pipe:
        if text:
            pipe.set(JOB_TEXT_KEY.format(job_id), json.dumps(text), ex=JOB_TEXT_TTL)
        pipe.hset(key, mapping=fields)
        pipe.execute()
    return ""


def _fail(redis: Redis, queue_name: str, job_id: str, why: str) -> None:
    """Out of the queue, into the failed registry, readable (JSON, no arguments) and saying why."""
    key, delivery = Job.key_for(job_id), job_id.split("--", 1)[-1]
    message = (f"queued as a pickle by an older version and not run: {why}. Redeliver delivery {delivery} "
               "from the App's settings (Advanced, Recent Deliveries)")
    with redis.pipeline() as pipe:
        pipe.lrem(make_queue(redis, queue_name).key, 0, job_id)
        pipe.zrem(ScheduledJobRegistry(queue_name, connection=redis).key, job_id)
        pipe.hset(key, mapping={"data": zlib.compress(SERIALIZER.dumps(("", None, [], {}))),
                                "meta": SERIALIZER.dumps({}), "status": "failed",
                                "exc_info": zlib.compress(message.encode())})
        pipe.zadd(FailedJobRegistry(queue_name, connection=redis).key, {job_id: time.time() + KEEP_SECONDS})
        pipe.execute()
    log.error("job %s: %s", job_id, message)

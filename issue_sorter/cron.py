"""RQ cron configuration (`issue-sorter cron` runs `rq cron issue_sorter.cron`): the periodic jobs of both applications.

The intervals are the settings read here (the retention of unconfirmed issue text is checked daily): rq loads this module itself, so they cannot be passed in.
"""

import os

from rq import cron

from bot.jobs import clear_unconfirmed, redeliver_failed
from core.abandoned import PERIODIC
from core.queues import CLEAR_UNCONFIRMED, JOB_TIMEOUT, REDELIVER_FAILED, RETRAIN_DUE
from core.settings import Settings
from trainer.jobs import retrain_due

settings = Settings.from_env(os.environ, require_webhook_secret=False)
cron.register(retrain_due, RETRAIN_DUE.queue, interval=settings.retrain_interval,
              job_timeout=JOB_TIMEOUT[RETRAIN_DUE.queue], meta={PERIODIC: True})
cron.register(redeliver_failed, REDELIVER_FAILED.queue, interval=settings.redelivery_interval,
              job_timeout=JOB_TIMEOUT[REDELIVER_FAILED.queue], meta={PERIODIC: True})
if settings.unconfirmed_retention_days is not None:
    cron.register(clear_unconfirmed, CLEAR_UNCONFIRMED.queue, interval=86400,
                  job_timeout=JOB_TIMEOUT[CLEAR_UNCONFIRMED.queue], meta={PERIODIC: True})

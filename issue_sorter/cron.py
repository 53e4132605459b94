"""RQ cron configuration (`issue-sorter cron` runs `rq cron issue_sorter.cron`): the periodic jobs of both applications.

The interval is the one setting read here: rq loads this module itself, so it cannot be passed in.
"""

import os

from rq import cron

from core.queues import JOB_TIMEOUT, RETRAIN_DUE
from core.settings import Settings
from trainer.jobs import retrain_due

settings = Settings.from_env(os.environ, require_webhook_secret=False)
cron.register(retrain_due, RETRAIN_DUE.queue, interval=settings.retrain_interval,
              job_timeout=JOB_TIMEOUT[RETRAIN_DUE.queue])

"""RQ cron configuration (`issue-sorter cron` runs `rq cron issue_sorter.cron_config`).

The interval is the one setting read here: rq loads this module itself, so it cannot be passed in.
"""

import os

from rq import cron

from bot.config import Settings
from bot.queueing import TRAINING_QUEUE
from trainer.jobs import retrain_due

settings = Settings.from_env(os.environ, require_webhook_secret=False)
cron.register(retrain_due, TRAINING_QUEUE, interval=settings.retrain_interval, job_timeout=6 * 3600)

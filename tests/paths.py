"""Where the shared, not-redistributed data lives (trainer.sources.shared_dir: ../shared beside the checkout,
or ISSUE_SORTER_SHARED)."""

from pathlib import Path

from trainer.sources import shared_dir

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = shared_dir().resolve()
NLBSE = SHARED / "data" / "nlbse24-issue-report-classification"
WEBHOOKS = SHARED / "github" / "webhooks"
API_RECORDINGS = SHARED / "github" / "api"
DATA = SHARED / "data"  # every labelled source: NLBSE'24, Ticket Tagger, ccims, huggingface/datasets
CCIMS = DATA / "ccims-issue-classification"

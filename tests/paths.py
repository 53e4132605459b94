"""Where the shared, not-redistributed data lives: ../shared beside the checkout (or ISSUE_SORTER_SHARED)."""

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("ISSUE_SORTER_SHARED", REPO_ROOT.parent / "shared")).resolve()
NLBSE = SHARED / "data" / "nlbse24-issue-report-classification"
WEBHOOKS = SHARED / "github" / "webhooks"
API_RECORDINGS = SHARED / "github" / "api"
DATA = SHARED / "data"  # every labelled source: NLBSE'24, Ticket Tagger, ccims, huggingface/datasets
CCIMS = DATA / "ccims-issue-classification"

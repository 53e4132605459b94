"""A repository's own labels beside the kind (issue 29): areas, components, topics (`module:linear_model`,
`streaming`, `dataset-viewer`), learnt from the issues its maintainers confirmed them on.

- `candidates`: which labels may be own labels (no kind, no step of the process), and which the config's
  `areas` take;
- `vote`: the memory's issues with the own labels each carries, and their vote (a label not served yet is
  suggested by it);
- `words`: the TF-IDF vocabulary of the memory's texts, which the heads read beside the embedding;
- `heads`: the rule: a head per label, its threshold at the target precision chosen on the memory's own
  rows, its knobs (`OwnLabelParams`);
- `storage`: the confirmed examples, the memory read with them, and the fitted rules stored as data.

What the bot uses is importable from here.
"""

from core.own_labels.candidates import candidates, in_areas, is_candidate
from core.own_labels.heads import DEFAULT_MIN_EXAMPLES, SUGGEST_SCORE, OwnLabelParams, OwnLabelRules, OwnScore
from core.own_labels.storage import confirm, memory_of, recall, refresh_stored, stored_rules, unconfirm
from core.own_labels.vote import OwnLabelMemory

__all__ = ["DEFAULT_MIN_EXAMPLES", "SUGGEST_SCORE", "OwnLabelMemory", "OwnLabelParams", "OwnLabelRules", "OwnScore",
           "candidates", "confirm", "in_areas", "is_candidate", "memory_of", "recall", "refresh_stored",
           "stored_rules", "unconfirm"]

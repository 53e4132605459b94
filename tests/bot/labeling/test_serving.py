"""The models a labelling worker keeps (bot.labeling.serving): loaded once per process, a bounded number (the
least recently used leaving, so an installation with many repositories of their own cannot fill a worker's
memory), and kept out of the garbage collector's way."""

import gc

import pytest

from bot.labeling.serving import Served, ServingModels
from tests.fakes import FakeClassifier


class Loaded:
    def __init__(self, path: str):
        self.path, self.version = path, path.rsplit("/", 1)[-1]


def serving(max_loaded: int, reads: list[str]) -> ServingModels:
    """Every repository has a model of its own, "v1", read from "models/<repo>/v1"."""
    def resolve(repo):
        scope = repo or "global"
        return Served(scope, "v1", f"models/{scope}/v1")

    def load(path: str) -> Loaded:
        reads.append(path)
        return Loaded(path)

    return ServingModels(resolve, load, max_loaded=max_loaded)


def test_a_worker_keeps_at_most_its_quota_of_models_the_least_recently_used_leaving():
    reads: list[str] = []
    models = serving(2, reads)
    models.for_repository("a/one")
    models.for_repository("a/two")
    models.for_repository("a/one")  # a/one is now the most recently used
    models.for_repository("a/three")  # over the quota: a/two leaves
    assert models.loaded_scopes == ["a/one", "a/three"]
    models.for_repository("a/one")
    assert reads == ["models/a/one/v1", "models/a/two/v1", "models/a/three/v1"]  # a/one was never read again
    models.for_repository("a/two")  # it left: read again from disk when it serves next
    assert reads[-1] == "models/a/two/v1" and models.loads == 4 and len(models.loaded_scopes) == 2


def test_many_repositories_served_in_turn_never_hold_more_than_the_quota():
    reads: list[str] = []
    models = serving(3, reads)
    for round_ in range(2):  # each load is a full garbage collection (keep_out_of_gc): a few rounds say it
        for n in range(12):
            assert models.for_repository(f"big/repo-{n}").path == f"models/big/repo-{n}/v1"
            assert len(models.loaded_scopes) <= 3


@pytest.fixture
def unfrozen():
    """This test process's objects back within the collector's reach before and after."""
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_a_loaded_model_is_kept_out_of_the_collectors_full_passes(unfrozen):
    """A full pass of the cyclic garbage collector walks every tracked object: in a worker with torch,
    transformers and a model loaded, half a million of them, seconds on a busy CPU. It comes whenever
    enough of the jobs' own objects have piled up, and that issue's label waits for it."""
    version = {"now": "v1"}
    models = ServingModels(lambda repo: Served("global", version["now"], f"/models/{version['now']}"),
                           lambda path: FakeClassifier({}, version=path.rsplit("/", 1)[1]))
    models.for_repository("octo/repo")
    assert gc.get_freeze_count() > 0  # loaded: out of reach
    gc.unfreeze()
    models.warm_up()
    assert gc.get_freeze_count() > 0  # and after the warm-up's allocations
    gc.unfreeze()
    version["now"] = "v2"  # a promotion: the new model is loaded in a job, and kept out of reach too
    assert models.for_repository("octo/repo").version == "v2" and models.loads == 2
    assert gc.get_freeze_count() > 0

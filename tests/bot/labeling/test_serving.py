"""The models a worker serves: loaded once per process, and kept out of the garbage collector's way."""

import gc

import pytest

from bot.labeling.serving import Served, ServingModels
from tests.fakes import FakeClassifier


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

"""core.inference_slots: at most N model passes at once on the machine, across processes, and a killed
holder never keeps its slot."""

import os
import stat
import subprocess
import sys
import threading

import pytest

from core.inference_slots import InferenceSlots, SlotsError, default_slots


def test_n_slots_let_n_holders_in_and_the_next_waits_until_one_leaves(tmp_path):
    slots = InferenceSlots(2, tmp_path)
    entered = threading.Event()
    with slots.held() as first, slots.held() as second:
        assert {first, second} == {0, 1}

        def third():
            with slots.held():
                entered.set()

        waiter = threading.Thread(target=third)
        waiter.start()
        assert not entered.wait(0.3)  # both slots are held
    assert entered.wait(5)  # released on leaving the block
    waiter.join(5)


@pytest.mark.e2e  # a Python process holds the slot and is killed
def test_a_slot_held_by_a_killed_process_is_free_again(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time\nfrom pathlib import Path\n"
         "from core.inference_slots import InferenceSlots\n"
         f"with InferenceSlots(1, Path({str(tmp_path)!r})).held():\n"
         "    print('held', flush=True)\n    time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True)
    got = threading.Event()

    def wait_for_the_slot():
        with InferenceSlots(1, tmp_path).held():
            got.set()

    try:
        assert holder.stdout.readline().strip() == "held"
        waiter = threading.Thread(target=wait_for_the_slot, daemon=True)
        waiter.start()
        assert not got.wait(0.3)  # the other process holds the only slot
    finally:
        holder.kill()
        holder.wait()
    assert got.wait(10)  # the kernel released the dead holder's lock, never unlocked by it
    waiter.join(5)


def test_no_slots_never_wait_and_make_no_folder(tmp_path):
    slots = InferenceSlots(0, tmp_path / "slots")
    with slots.held() as a, slots.held() as b:
        assert (a, b) == (None, None)
    assert not (tmp_path / "slots").exists()


def test_one_slot_per_worker_threads_cores_and_never_none():
    assert default_slots(1, cores=2) == 2
    assert default_slots(2, cores=2) == 1
    assert default_slots(4, cores=2) == 1  # more threads than cores: still one pass at a time
    assert default_slots(1, cores=16) == 16


def test_negative_slots_are_refused():
    with pytest.raises(ValueError, match="must not be negative"):
        InferenceSlots(-1)


@pytest.mark.parametrize(("environ", "slots"), [({}, default_slots(1)), ({"ISSUE_SORTER_INFERENCE_SLOTS": "0"}, 0),
                                                 ({"ISSUE_SORTER_INFERENCE_SLOTS": "3"}, 3),
                                                 ({"ISSUE_SORTER_WORKER_THREADS": "2"}, default_slots(2))])
def test_a_worker_takes_its_slots_from_the_settings(environ, slots, tmp_path):
    from bot.worker import build_context
    from core.settings import Settings

    settings = Settings.from_env({**environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}"},
                                 require_webhook_secret=False)
    assert build_context(settings, redis=object()).inference_slots.count == slots


def test_a_negative_slot_setting_is_a_clear_error():
    from core.settings import ConfigError, Settings

    with pytest.raises(ConfigError, match="ISSUE_SORTER_INFERENCE_SLOTS.*must not be negative"):
        Settings.from_env({"ISSUE_SORTER_INFERENCE_SLOTS": "-1"}, require_webhook_secret=False)


def test_the_default_folder_is_under_the_apps_var_not_a_guessable_tmp_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    slots = InferenceSlots(1)
    with slots.held():
        pass
    assert slots.folder == tmp_path / "var" / "inference-slots"
    assert stat.S_IMODE(slots.folder.stat().st_mode) == 0o700 and stat.S_IMODE((tmp_path / "var").stat().st_mode) == 0o700


@pytest.mark.parametrize("mode", [0o755, 0o770, 0o701])
def test_a_folder_other_users_can_enter_or_write_is_refused(tmp_path, mode):
    """The folder in /tmp had a guessable name and was trusted whatever its owner and mode, so
    another user could create it first and hold every slot."""
    folder = tmp_path / "slots"
    folder.mkdir()
    folder.chmod(mode)
    with pytest.raises(SlotsError, match="chmod 700"):
        InferenceSlots(1, folder)


def test_a_folder_of_another_user_or_a_link_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    (tmp_path / "slots").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SlotsError, match="not a folder"):
        InferenceSlots(1, tmp_path / "slots")
    if os.getuid() == 0:  # root can give a folder away: check the owner too
        (tmp_path / "theirs").mkdir(mode=0o700)
        os.chown(tmp_path / "theirs", 12345, -1)
        with pytest.raises(SlotsError, match="belongs to user id 12345"):
            InferenceSlots(1, tmp_path / "theirs")


def test_a_pass_waits_for_a_slot_a_bounded_time_then_says_so(tmp_path):
    slots = InferenceSlots(1, tmp_path, wait_seconds=0.2)
    with slots.held():
        with pytest.raises(SlotsError, match="no inference slot came free in 0.2 s"):
            with slots.held():
                pass

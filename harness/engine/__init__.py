"""The engine: explore a processor, replay a saved failure, run one schedule.

* :func:`explore` (:mod:`harness.engine.explorer`): the systematic and drawn search phases
  (:mod:`harness.search`), shrinking, the replay file, every distinct problem;
* :func:`replay` and :func:`run_once` (:mod:`harness.engine.runs`): one schedule, run and
  judged;
* :func:`rerun` (:mod:`harness.engine.reruns`): a failing schedule run again, flaky processors
  and processor errors explained;
* the values they return: :class:`Exploration`, :class:`Failure` inside
  :class:`CounterexampleFound` (:mod:`harness.engine.results`), and :class:`Replay`, the
  content of a replay file (:mod:`harness.engine.replay_file`);
* :func:`load_processor` and :func:`make_processor` (:mod:`harness.engine.loading`): a
  processor found again by name.
"""

from harness.engine.explorer import default_seed, explore
from harness.engine.loading import load_processor, make_processor
from harness.engine.replay_file import REPLAY_VERSION, Replay
from harness.engine.reruns import rerun
from harness.engine.results import CounterexampleFound, Exploration, Failure
from harness.engine.runs import replay, run_once

__all__ = [
    "REPLAY_VERSION",
    "CounterexampleFound",
    "Exploration",
    "Failure",
    "Replay",
    "default_seed",
    "explore",
    "load_processor",
    "make_processor",
    "replay",
    "rerun",
    "run_once",
]

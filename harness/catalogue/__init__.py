"""The catalogue: processors under test, each with its claim, its expected anomalies and the
faults it is known to need (:class:`Subject`), grouped into seed :class:`Scenario` s.

* :mod:`harness.catalogue.subject`: the :class:`Subject` and :class:`Scenario` types;
* :mod:`harness.catalogue.toys`: ``TOYS``, tiny correct processors and broken twins;
* :mod:`harness.catalogue.seeds`: ``SCENARIOS``, the seed documents' situations
  (``harness.scenarios``);
* :mod:`harness.catalogue.streams`: ``STREAM_SUBJECTS``, the built-in Structured Streaming
  variants (``python -m harness spark-job variant:NAME``);
* :mod:`harness.cli.matrix`: the mutation matrix that explores them all.

This package's import loads only the types; toys, seeds and the matrix load on their own.
"""

from harness.catalogue.subject import Scenario, Subject

__all__ = ["Scenario", "Subject"]

"""Tasks: one interface (:class:`Task`), one constructor per experiment."""

from rt_lib.tasks.base import IGNORE, Batch, FiniteTask, Task, split_indices
from rt_lib.tasks.modular import modular_addition
from rt_lib.tasks.primes import is_prime, primes_below

__all__ = ["IGNORE", "Batch", "FiniteTask", "Task", "split_indices", "modular_addition",
           "is_prime", "primes_below"]
